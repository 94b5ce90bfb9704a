#include "tensorflow_customops/core/ops/compat/op_compat.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tensorflow/core/framework/attr_value_util.h"
#include "tensorflow/core/framework/graph_def_util.h"
#include "tensorflow/core/framework/node_def_util.h"
#include "tensorflow/core/framework/op_def_util.h"
#include "tensorflow/core/platform/protobuf.h"
#include "tensorflow_customops/core/platform/status_compat.h"

namespace tensorflow {
namespace customops_compat {
namespace {

constexpr char kFileHeader[] =
    "# Written by bazel run "
    "//tensorflow_customops/core/ops/compat:update_ops_history; never edit.\n";

bool IsCustomOp(const std::string& name) {
  return absl::StartsWith(name, kOpPrefix);
}

std::string Describe(const std::string& op, int version, int count) {
  return absl::StrCat(op, ": history version ", version, " of ", count, " (",
                      HistoryFileName(op), ")");
}

// TensorFlow's OpDefCompatible ignores these flags, yet flipping them changes
// how graphs are optimised (constant folding, CSE, AddN rewrites).
void CheckFlags(const OpDef& old_op, const OpDef& new_op,
                const std::string& where, std::vector<std::string>* errors) {
  const std::pair<const char*, std::pair<bool, bool>> flags[] = {
      {"is_stateful", {old_op.is_stateful(), new_op.is_stateful()}},
      {"is_commutative", {old_op.is_commutative(), new_op.is_commutative()}},
      {"is_aggregate", {old_op.is_aggregate(), new_op.is_aggregate()}},
  };
  for (const auto& [flag, values] : flags) {
    if (values.first != values.second) {
      errors->push_back(absl::StrCat(
          where, ": ", flag, " changed from ", values.first ? "true" : "false",
          " to ", values.second ? "true" : "false",
          "; graph optimisations rely on it, so it may never change"));
    }
  }
}

std::string TextProto(const protobuf::Message& message) {
  std::string text;
  protobuf::TextFormat::PrintToString(message, &text);
  return text;
}

Status ReadTextProto(const std::string& path, protobuf::Message* message) {
  std::ifstream in(path);
  if (!in) return errors::NotFound("cannot read ", path);
  std::stringstream text;
  text << in.rdbuf();
  if (!protobuf::TextFormat::ParseFromString(text.str(), message)) {
    return errors::InvalidArgument("cannot parse ", path, " as text-format ",
                                   message->GetTypeName());
  }
  return OkStatus();
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return errors::Internal("cannot write ", path);
  return OkStatus();
}

}  // namespace

std::string HistoryFileName(const std::string& op_name) {
  return absl::StrReplaceAll(op_name, {{">", "_"}}) + ".pbtxt";
}

OpList RegisteredCustomOps(const OpRegistry& registry) {
  OpList all;
  registry.Export(/*include_internal=*/false, &all);
  std::vector<OpDef> ops;
  for (OpDef& op : *all.mutable_op()) {
    if (IsCustomOp(op.name())) ops.push_back(std::move(op));
  }
  std::sort(ops.begin(), ops.end(),
            [](const OpDef& a, const OpDef& b) { return a.name() < b.name(); });
  OpList list;
  for (OpDef& op : ops) *list.add_op() = std::move(op);
  return list;
}

OpDef StripDocs(const OpDef& op_def) {
  OpDef stripped = op_def;
  RemoveDescriptionsFromOpDef(&stripped);
  return stripped;
}

std::vector<std::string> IncompatibleChanges(const OpList& current,
                                             const OpHistory& history) {
  std::vector<std::string> errors;
  std::set<std::string> current_names;
  // Lower-cased file name -> op: catches collisions of the name mapping and
  // on case-insensitive file systems.
  std::map<std::string, std::string> files;
  auto claim_file = [&](const std::string& op) {
    const std::string file = absl::AsciiStrToLower(HistoryFileName(op));
    auto [it, inserted] = files.emplace(file, op);
    if (!inserted && it->second != op) {
      errors.push_back(absl::StrCat(op, " and ", it->second,
                                    " map to the same history file ",
                                    HistoryFileName(op), "; rename one op"));
    }
  };

  for (const OpDef& op : current.op()) {
    current_names.insert(op.name());
    claim_file(op.name());
    auto it = history.find(op.name());
    if (it == history.end()) continue;
    const OpDef now = StripDocs(op);
    const OpList& versions = it->second;
    const int count = versions.op_size();
    for (int i = 0; i < count; ++i) {
      const OpDef& old_op = versions.op(i);
      const std::string where = Describe(op.name(), i + 1, count);
      const std::pair<const char*, Status> checks[] = {
          {"incompatible change", OpDefCompatible(old_op, now)},
          {"default changed", OpDefAttrDefaultsUnchanged(old_op, now)},
          {"default of an added attr changed",
           OpDefAddedDefaultsUnchanged(old_op, versions.op(count - 1), now)},
      };
      for (const auto& [rule, status] : checks) {
        if (!status.ok()) {
          errors.push_back(absl::StrCat(where, ": ", rule, ": ",
                                        customops::StatusMessage(status)));
        }
      }
      CheckFlags(old_op, now, where, &errors);
    }
  }
  for (const auto& [name, versions] : history) {
    claim_file(name);
    if (current_names.count(name) == 0) {
      errors.push_back(absl::StrCat(
          name, ": op disappeared, but ", HistoryFileName(name), " records ",
          versions.op_size(),
          " version(s); saved GraphDefs name it, so it must stay registered"));
    }
  }
  return errors;
}

std::vector<std::string> PendingUpdates(const OpList& current,
                                        const OpHistory& history,
                                        const OpList& recorded) {
  std::vector<std::string> pending;
  for (const OpDef& op : current.op()) {
    auto it = history.find(op.name());
    if (it == history.end() || it->second.op_size() == 0) {
      pending.push_back(absl::StrCat("no history for op ", op.name(), "; run ",
                                     kUpdateCommand));
      continue;
    }
    const OpList& versions = it->second;
    const int count = versions.op_size();
    if (!OpDefEqual(versions.op(count - 1), StripDocs(op))) {
      pending.push_back(
          absl::StrCat(Describe(op.name(), count, count),
                       " is the latest, but the spec differs from it; run ",
                       kUpdateCommand, " to record version ", count + 1));
    }
  }
  if (TextProto(current) != TextProto(recorded)) {
    pending.push_back(absl::StrCat(
        "registered_ops/ differs from the registered ops (a spec or its docs "
        "changed); run ",
        kUpdateCommand));
  }
  return pending;
}

std::vector<std::string> UpdateHistory(const OpList& current,
                                       OpHistory* history) {
  std::vector<std::string> changed;
  for (const OpDef& op : current.op()) {
    const OpDef now = StripDocs(op);
    OpList& versions = (*history)[op.name()];
    const int count = versions.op_size();
    if (count == 0 || !OpDefEqual(versions.op(count - 1), now)) {
      *versions.add_op() = now;
      changed.push_back(absl::StrCat(op.name(), " version ", count + 1));
    }
  }
  return changed;
}

Status ReadHistory(const std::string& dir, OpHistory* history) {
  // No folder yet: every op will be reported as having no history.
  if (!std::filesystem::exists(dir)) return OkStatus();
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".pbtxt") continue;
    OpList versions;
    TF_RETURN_IF_ERROR(ReadTextProto(path, &versions));
    if (versions.op_size() == 0) {
      return errors::InvalidArgument(path, " records no version");
    }
    const std::string& name = versions.op(0).name();
    for (const OpDef& op : versions.op()) {
      if (op.name() != name) {
        return errors::InvalidArgument(path, " mixes ops ", name, " and ",
                                       op.name());
      }
    }
    if (HistoryFileName(name) != entry.path().filename().string()) {
      return errors::InvalidArgument(path, " holds ", name, ", expected in ",
                                     HistoryFileName(name));
    }
    (*history)[name] = std::move(versions);
  }
  if (error)
    return errors::NotFound("cannot list ", dir, ": ", error.message());
  return OkStatus();
}

Status WriteHistory(const std::string& dir, const OpHistory& history) {
  std::filesystem::create_directories(dir);
  for (const auto& [name, versions] : history) {
    TF_RETURN_IF_ERROR(WriteText(
        absl::StrCat(dir, "/", HistoryFileName(name)),
        absl::StrCat("# ", name,
                     ": every version of its spec, oldest first, docs "
                     "stripped.\n",
                     kFileHeader, TextProto(versions))));
  }
  return OkStatus();
}

Status ReadOpList(const std::string& path, OpList* ops) {
  if (!std::filesystem::is_directory(path)) return ReadTextProto(path, ops);
  std::vector<OpDef> all;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    if (entry.path().extension() != ".pbtxt") continue;
    OpList file;
    TF_RETURN_IF_ERROR(ReadTextProto(entry.path().string(), &file));
    for (OpDef& op : *file.mutable_op()) all.push_back(std::move(op));
  }
  if (error) {
    return errors::NotFound("cannot list ", path, ": ", error.message());
  }
  // In RegisteredCustomOps' order, whatever the directory's.
  std::sort(all.begin(), all.end(),
            [](const OpDef& a, const OpDef& b) { return a.name() < b.name(); });
  ops->Clear();
  for (OpDef& op : all) *ops->add_op() = std::move(op);
  return OkStatus();
}

Status WriteRegisteredOps(const std::string& dir, const OpList& ops) {
  std::filesystem::create_directories(dir);
  for (const OpDef& op : ops.op()) {
    OpList file;
    *file.add_op() = op;
    TF_RETURN_IF_ERROR(WriteText(
        absl::StrCat(dir, "/", HistoryFileName(op.name())),
        absl::StrCat("# ", op.name(), " as registered now, with docs.\n",
                     kFileHeader, TextProto(file))));
  }
  return OkStatus();
}

Status DowngradeGraphDef(const OpList& consumer_ops,
                         const OpRegistryInterface& producer, GraphDef* graph) {
  std::vector<NodeDef*> nodes;
  auto collect = [&nodes](protobuf::RepeatedPtrField<NodeDef>* field) {
    for (NodeDef& node : *field) {
      if (IsCustomOp(node.op())) nodes.push_back(&node);
    }
  };
  collect(graph->mutable_node());
  for (FunctionDef& function : *graph->mutable_library()->mutable_function()) {
    collect(function.mutable_node_def());
  }

  OpListOpRegistry consumer(&consumer_ops);
  for (const NodeDef* node : nodes) {
    if (consumer.LookUp(node->op()) == nullptr) {
      return errors::FailedPrecondition(
          "node '", node->name(), "' uses op ", node->op(),
          ", which the consumer's release does not have");
    }
  }
  // TensorFlow's rewrite needs every op of the graph in both registries, so
  // it runs on a copy holding only our nodes.
  GraphDef ours;
  for (const NodeDef* node : nodes) *ours.add_node() = *node;
  TF_RETURN_IF_ERROR(
      RemoveNewDefaultAttrsFromGraphDef(&ours, consumer, producer, nullptr));

  for (int i = 0; i < ours.node_size(); ++i) {
    const NodeDef& node = ours.node(i);
    const OpDef* consumer_def = &consumer.LookUp(node.op())->op_def;
    const OpDef* producer_def = nullptr;
    TF_RETURN_IF_ERROR(producer.LookUpOpDef(node.op(), &producer_def));
    for (const auto& [attr, value] : node.attr()) {
      if (FindAttr(attr, *consumer_def) != nullptr) continue;
      const OpDef::AttrDef* def = FindAttr(attr, *producer_def);
      return errors::FailedPrecondition(
          "node '", node.name(), "' (", node.op(), ") sets ", attr, " = ",
          SummarizeAttrValue(value), ", not its default ",
          def != nullptr && def->has_default_value()
              ? SummarizeAttrValue(def->default_value())
              : "(none)",
          "; the consumer's release has no attr '", attr,
          "', so this graph needs a newer release there");
    }
    Status valid = ValidateNodeDef(node, *consumer_def);
    if (!valid.ok()) {
      return errors::FailedPrecondition(
          "node '", node.name(), "' (", node.op(),
          ") does not fit the consumer's release: ",
          customops::StatusMessage(valid));
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) *nodes[i] = ours.node(i);
  return OkStatus();
}

}  // namespace customops_compat
}  // namespace tensorflow
