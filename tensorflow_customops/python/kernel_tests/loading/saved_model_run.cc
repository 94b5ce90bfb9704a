// Runs a SavedModel the way a C or C++ program serving it does, through
// TensorFlow's C API: optionally loads op libraries (TF_LoadLibrary), loads
// the model (TF_LoadSessionFromSavedModel, tag "serve") and runs one signature.
// saved_model_c_api_test drives it.
//
//   saved_model_run [--library=PATH]... --export_dir=DIR
//       --input=TENSOR:DTYPE:D0xD1x...:FILE... --output=TENSOR:FILE
//
// TENSOR is a graph tensor name ("serving_default_x:0"), DTYPE float32 or
// int32, FILE the raw values. The output's raw values go to its FILE, and its
// shape to stdout. TensorFlow's errors go to stderr, with exit status 1.

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tensorflow/c/c_api.h"

namespace {

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) {
    parts.push_back(part);
  }
  return parts;
}

// "op:index" -> the graph's TF_Output, or {nullptr, 0}.
TF_Output GraphTensor(TF_Graph* graph, const std::string& name) {
  const size_t colon = name.rfind(':');
  return {TF_GraphOperationByName(graph, name.substr(0, colon).c_str()),
          std::stoi(name.substr(colon + 1))};
}

int Fail(const std::string& message) {
  std::cerr << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> libraries, inputs;
  std::string export_dir, output;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string value = arg.substr(arg.find('=') + 1);
    if (arg.rfind("--library=", 0) == 0) {
      libraries.push_back(value);
    } else if (arg.rfind("--export_dir=", 0) == 0) {
      export_dir = value;
    } else if (arg.rfind("--input=", 0) == 0) {
      inputs.push_back(value);
    } else if (arg.rfind("--output=", 0) == 0) {
      output = value;
    } else {
      std::cerr << "unknown argument " << arg << "\n";
      return 2;
    }
  }
  const std::vector<std::string> output_spec = Split(output, ':');
  if (export_dir.empty() || output_spec.size() != 3) {
    std::cerr
        << "usage: " << argv[0]
        << " [--library=PATH]... --export_dir=DIR "
           "--input=TENSOR:DTYPE:D0xD1x...:FILE... --output=TENSOR:FILE\n";
    return 2;
  }

  TF_Status* status = TF_NewStatus();
  for (const std::string& library : libraries) {
    // The handle stays open: the ops stay registered for the process.
    TF_LoadLibrary(library.c_str(), status);
    if (TF_GetCode(status) != TF_OK) return Fail(TF_Message(status));
  }
  TF_Graph* graph = TF_NewGraph();
  TF_SessionOptions* options = TF_NewSessionOptions();
  const char* tags[] = {"serve"};
  TF_Session* session = TF_LoadSessionFromSavedModel(
      options, nullptr, export_dir.c_str(), tags, 1, graph, nullptr, status);
  TF_DeleteSessionOptions(options);
  if (TF_GetCode(status) != TF_OK) return Fail(TF_Message(status));

  std::vector<TF_Output> feeds;
  std::vector<TF_Tensor*> values;
  for (const std::string& spec : inputs) {
    const std::vector<std::string> parts = Split(spec, ':');
    if (parts.size() != 5) return Fail("bad --input " + spec);
    const TF_Output feed = GraphTensor(graph, parts[0] + ":" + parts[1]);
    if (feed.oper == nullptr) return Fail("no tensor " + parts[0]);
    TF_DataType dtype;
    if (parts[2] == "float32") {
      dtype = TF_FLOAT;
    } else if (parts[2] == "int32") {
      dtype = TF_INT32;
    } else {
      return Fail("bad dtype " + parts[2]);
    }
    std::vector<int64_t> dims;
    for (const std::string& dim : Split(parts[3], 'x')) {
      dims.push_back(std::stoll(dim));
    }
    std::ifstream file(parts[4], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
    size_t size = TF_DataTypeSize(dtype);
    for (const int64_t dim : dims) size *= dim;
    if (bytes.size() != size) {
      return Fail("the size of " + parts[4] + " does not fit its shape");
    }
    TF_Tensor* tensor = TF_AllocateTensor(dtype, dims.data(),
                                          static_cast<int>(dims.size()), size);
    std::copy(bytes.begin(), bytes.end(),
              static_cast<char*>(TF_TensorData(tensor)));
    feeds.push_back(feed);
    values.push_back(tensor);
  }

  const TF_Output fetch =
      GraphTensor(graph, output_spec[0] + ":" + output_spec[1]);
  if (fetch.oper == nullptr) return Fail("no tensor " + output_spec[0]);
  TF_Tensor* result = nullptr;
  TF_SessionRun(session, nullptr, feeds.data(), values.data(),
                static_cast<int>(feeds.size()), &fetch, &result, 1, nullptr, 0,
                nullptr, status);
  for (TF_Tensor* tensor : values) TF_DeleteTensor(tensor);
  if (TF_GetCode(status) != TF_OK) return Fail(TF_Message(status));

  std::ofstream(output_spec[2], std::ios::binary)
      .write(static_cast<const char*>(TF_TensorData(result)),
             static_cast<std::streamsize>(TF_TensorByteSize(result)));
  for (int d = 0; d < TF_NumDims(result); ++d) {
    std::cout << (d ? "x" : "") << TF_Dim(result, d);
  }
  std::cout << "\n";
  TF_DeleteTensor(result);
  TF_CloseSession(session, status);
  TF_DeleteSession(session, status);
  TF_DeleteGraph(graph);
  TF_DeleteStatus(status);
  return 0;
}
