// The command line of the op compatibility tools; see BUILD.
//
//   ops_compat check     --library=SO --compat_dir=DIR
//   ops_compat update    --library=SO --compat_dir=DIR
//   ops_compat downgrade --library=SO --consumer_ops=OPS_PBTXT
//                        --in=GRAPH_PBTXT --out=GRAPH_PBTXT
//
// check fails on any incompatible change or pending update; update refuses
// incompatible changes with the same messages and otherwise is the only
// writer of DIR/ops_history_v1/ and DIR/registered_ops/. downgrade's
// OPS_PBTXT is a text OpList, or a folder of them (an older release's
// registered_ops/). Under `bazel run`, paths other than --library (a runfile)
// are taken from the workspace.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/protobuf.h"
#include "tensorflow_customops/core/ops/compat/op_compat.h"
#include "tensorflow_customops/core/platform/status_compat.h"

namespace tensorflow {
namespace customops_compat {
namespace {

constexpr char kHistoryDir[] = "/ops_history_v1";
constexpr char kRegisteredOpsDir[] = "/registered_ops";

std::string FromWorkspace(const std::string& path) {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace == nullptr || path.empty() || path[0] == '/') return path;
  return std::string(workspace) + "/" + path;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 1;
}

int Report(const char* title, const std::vector<std::string>& lines) {
  if (lines.empty()) return 0;
  std::fprintf(stderr, "%s\n", title);
  for (const std::string& line : lines) {
    std::fprintf(stderr, "  %s\n", line.c_str());
  }
  return 1;
}

// The CustomOps> ops registered by the op library at `path`.
Status LoadCustomOps(const std::string& path, OpList* ops) {
  void* handle = nullptr;
  // Loading runs the library's REGISTER_OP initialisers.
  TF_RETURN_IF_ERROR(Env::Default()->LoadDynamicLibrary(path.c_str(), &handle));
  *ops = RegisteredCustomOps(*OpRegistry::Global());
  return OkStatus();
}

int CheckOrUpdate(bool update, const std::string& compat_dir,
                  const OpList& current) {
  OpHistory history;
  Status status = ReadHistory(compat_dir + kHistoryDir, &history);
  if (!status.ok()) return Fail(customops::StatusMessage(status));
  OpList recorded;
  // A missing registered_ops/ is one more pending update.
  ReadOpList(compat_dir + kRegisteredOpsDir, &recorded).IgnoreError();

  if (Report("Incompatible op changes (never allowed; revert them or add a "
             "new op):",
             IncompatibleChanges(current, history)) != 0) {
    return 1;
  }
  if (!update) {
    return Report("The op history is out of date:",
                  PendingUpdates(current, history, recorded));
  }
  const std::vector<std::string> changed = UpdateHistory(current, &history);
  status = WriteHistory(compat_dir + kHistoryDir, history);
  if (status.ok()) {
    status = WriteRegisteredOps(compat_dir + kRegisteredOpsDir, current);
  }
  if (!status.ok()) return Fail(customops::StatusMessage(status));
  for (const std::string& line : changed) {
    std::printf("recorded %s\n", line.c_str());
  }
  std::printf("%s up to date in %s.%s\n",
              changed.empty() ? "history" : "history now", compat_dir.c_str(),
              changed.empty()
                  ? ""
                  : " Record the new goldens: bazel run "
                    "//tensorflow_customops/core/ops/compat:record_goldens");
  return 0;
}

int Downgrade(const std::string& consumer, const std::string& in,
              const std::string& out) {
  OpList consumer_ops;
  Status status = ReadOpList(consumer, &consumer_ops);
  GraphDef graph;
  if (status.ok()) {
    std::ifstream file(in);
    std::stringstream text;
    text << file.rdbuf();
    if (!file || !protobuf::TextFormat::ParseFromString(text.str(), &graph)) {
      status = errors::InvalidArgument("cannot read a text GraphDef from ", in);
    }
  }
  if (status.ok()) {
    status = DowngradeGraphDef(consumer_ops, *OpRegistry::Global(), &graph);
  }
  if (status.ok()) {
    std::string text;
    protobuf::TextFormat::PrintToString(graph, &text);
    status = WriteStringToFile(Env::Default(), out, text);
  }
  if (!status.ok()) return Fail(customops::StatusMessage(status));
  return 0;
}

}  // namespace
}  // namespace customops_compat
}  // namespace tensorflow

int main(int argc, char** argv) {
  using namespace tensorflow::customops_compat;  // NOLINT
  if (argc < 2) return Fail("usage: ops_compat check|update|downgrade ...");
  const std::string command = argv[1];
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (!absl::StartsWith(arg, "--") || eq == std::string::npos) {
      return Fail("expected --name=value, got " + arg);
    }
    flags[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
  }
  tensorflow::OpList current;
  tensorflow::Status status = LoadCustomOps(flags["library"], &current);
  if (!status.ok()) return Fail(tensorflow::customops::StatusMessage(status));
  if (command == "check" || command == "update") {
    return CheckOrUpdate(command == "update",
                         FromWorkspace(flags["compat_dir"]), current);
  }
  if (command == "downgrade") {
    return Downgrade(FromWorkspace(flags["consumer_ops"]),
                     FromWorkspace(flags["in"]), FromWorkspace(flags["out"]));
  }
  return Fail("unknown command " + command);
}
