// Compares a file of GPU outputs with the expected outputs of a case file, as
// gpu_check does after a run: one line per case, then "N passed, N failed".
// Exit status 1 when a case fails. Used where the outputs were written by
// `gpu_check --outputs`, and by the tests of the comparison itself.
//
//   compare_outputs CASES ACTUAL

#include <iostream>
#include <map>
#include <stdexcept>
#include <string>

#include "tools/gpu_check/case_file.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: compare_outputs CASES ACTUAL\n";
    return 2;
  }
  try {
    const std::vector<gpu_check::Case> expected = gpu_check::ReadCases(argv[1]);
    std::map<std::string, gpu_check::Case> actual;
    for (gpu_check::Case& c : gpu_check::ReadCases(argv[2])) {
      actual[c.name] = std::move(c);
    }
    return gpu_check::Report(expected, actual, {}, std::cout) == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "compare_outputs: " << e.what() << "\n";
    return 2;
  }
}
