// Negative and positive tests of the op compatibility checks on synthetic
// OpDefs that are never registered, so no test-only op ships in the wheel.
// CHECK failures abort, which fails the test.

#include "tensorflow_customops/core/ops/compat/op_compat.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "tensorflow/core/framework/node_def_builder.h"
#include "tensorflow/core/framework/op_def_builder.h"
#include "tensorflow_customops/core/platform/status_compat.h"

namespace tensorflow {
namespace customops_compat {
namespace {

constexpr char kOp[] = "CustomOps>Synthetic";

// Builds a spec of kOp from OpDefBuilder lines such as "Input:x: T".
OpDef Spec(const std::vector<std::string>& lines, bool stateful = false) {
  OpDefBuilder builder(kOp);
  for (const std::string& line : lines) {
    const size_t colon = line.find(':');
    const std::string kind = line.substr(0, colon);
    const std::string spec = line.substr(colon + 1);
    if (kind == "Input") builder.Input(spec);
    if (kind == "Output") builder.Output(spec);
    if (kind == "Attr") builder.Attr(spec);
  }
  if (stateful) builder.SetIsStateful();
  OpRegistrationData data;
  TF_CHECK_OK(builder.Finalize(&data));
  return data.op_def;
}

const std::vector<std::string> kV1 = {"Input:x: T", "Output:y: T",
                                      "Attr:T: {int32, float} = DT_INT32"};

OpList ListOf(const OpDef& op) {
  OpList list;
  *list.add_op() = op;
  return list;
}

OpHistory HistoryOf(const std::vector<OpDef>& versions) {
  OpHistory history;
  for (const OpDef& op : versions) *history[op.name()].add_op() = op;
  return history;
}

std::vector<std::string> With(std::vector<std::string> lines,
                              const std::string& line) {
  lines.push_back(line);
  return lines;
}

// Every error of `current` against `history` contains `expected`, and there
// is at least one.
void ExpectRejected(const std::string& change,
                    const std::vector<OpDef>& history, const OpDef& current,
                    const std::vector<std::string>& expected) {
  const std::vector<std::string> errors =
      IncompatibleChanges(ListOf(current), HistoryOf(history));
  const std::string all = absl::StrJoin(errors, "\n");
  std::printf("%s:\n  %s\n", change.c_str(), all.c_str());
  CHECK(!errors.empty()) << change << " was accepted";
  for (const std::string& text : expected) {
    CHECK(absl::StrContains(all, text))
        << change << ": expected '" << text << "' in:\n"
        << all;
  }
}

void TestIncompatibleChanges() {
  const OpDef v1 = Spec(With(kV1, "Attr:keep: int = 1"));
  const std::string version = "CustomOps>Synthetic: history version 1 of 1";
  ExpectRejected("remove an attr", {v1}, Spec(kV1),
                 {version, "Attr 'keep' removed"});
  ExpectRejected("change a default", {v1},
                 Spec(With(kV1, "Attr:keep: int = 2")),
                 {version, "default changed", "keep"});
  ExpectRejected("narrow the allowed types", {v1},
                 Spec({"Input:x: T", "Output:y: T",
                       "Attr:T: {int32} = DT_INT32", "Attr:keep: int = 1"}),
                 {version, "stricter set of allowed values"});
  ExpectRejected("add an attr without a default", {v1},
                 Spec(With(With(kV1, "Attr:keep: int = 1"), "Attr:axis: int")),
                 {version, "Attr 'axis' added without default"});
  ExpectRejected(
      "rename an output", {v1},
      Spec({"Input:x: T", "Output:renamed: T",
            "Attr:T: {int32, float} = DT_INT32", "Attr:keep: int = 1"}),
      {version, "Output signature mismatch"});
  ExpectRejected(
      "change an input type", {v1},
      Spec({"Input:x: int64", "Output:y: T",
            "Attr:T: {int32, float} = DT_INT32", "Attr:keep: int = 1"}),
      {version, "Input signature mismatch"});
  ExpectRejected("add an input", {v1},
                 Spec(With(With(kV1, "Attr:keep: int = 1"), "Input:z: float")),
                 {version, "Input signature mismatch"});
  ExpectRejected("make the op stateful", {v1},
                 Spec(With(kV1, "Attr:keep: int = 1"), /*stateful=*/true),
                 {version, "is_stateful changed from false to true"});
  // keep was added in version 2 with default 1; version 1 alone would not
  // notice a later change of that default.
  ExpectRejected(
      "change the default of an added attr",
      {Spec(kV1), Spec(With(kV1, "Attr:keep: int = 1"))},
      Spec(With(kV1, "Attr:keep: int = 3")),
      {"history version 1 of 2", "default of an added attr changed", "keep"});
}

void TestOpRemovedAndFileCollision() {
  OpList current;
  std::vector<std::string> errors =
      IncompatibleChanges(current, HistoryOf({Spec(kV1)}));
  CHECK_EQ(errors.size(), 1);
  CHECK(absl::StrContains(errors[0], "CustomOps>Synthetic: op disappeared"))
      << errors[0];

  OpDef a = Spec(kV1);
  OpDef b = Spec(kV1);
  a.set_name("CustomOps>A_B");
  b.set_name("CustomOps>a>b");
  *current.add_op() = a;
  *current.add_op() = b;
  errors = IncompatibleChanges(current, {});
  CHECK_EQ(errors.size(), 1);
  CHECK(absl::StrContains(errors[0], "map to the same history file"))
      << errors[0];
}

// A compatible evolution is accepted, flagged as pending until recorded, and
// recorded as a new version by the updater.
void TestCompatibleEvolutionAndUpdate() {
  OpHistory history;
  const OpList v1 = ListOf(Spec(kV1));
  std::vector<std::string> pending = PendingUpdates(v1, history, OpList());
  CHECK_EQ(pending.size(), 2);
  CHECK_EQ(pending[0],
           "no history for op CustomOps>Synthetic; run bazel run "
           "//tensorflow_customops/core/ops/compat:update_ops_history");
  CHECK(absl::StrContains(pending[1], "registered_ops/ differs")) << pending[1];
  CHECK_EQ(UpdateHistory(v1, &history).size(), 1);

  const OpList v2 = ListOf(
      Spec({"Input:x: T", "Output:y: T",
            "Attr:T: {int32, float, uint8} = DT_INT32", "Attr:keep: int = 1"}));
  CHECK(IncompatibleChanges(v2, history).empty());
  pending = PendingUpdates(v2, history, v2);
  CHECK_EQ(pending.size(), 1);
  CHECK(absl::StrContains(pending[0],
                          "CustomOps>Synthetic: history version 1 of 1 "
                          "(CustomOps_Synthetic.pbtxt) is the latest, but the "
                          "spec differs from it"))
      << pending[0];
  CHECK(absl::StrContains(pending[0], "to record version 2")) << pending[0];
  CHECK_EQ(UpdateHistory(v2, &history)[0], "CustomOps>Synthetic version 2");
  CHECK_EQ(history[kOp].op_size(), 2);
  CHECK(PendingUpdates(v2, history, v2).empty());
  CHECK(UpdateHistory(v2, &history).empty());
  CHECK_EQ(HistoryFileName(kOp), "CustomOps_Synthetic.pbtxt");
}

const OpDef& Producer() {
  static const OpDef* producer = new OpDef(
      Spec({"Input:x: T", "Output:y: T",
            "Attr:T: {int32, float, uint8} = DT_INT32", "Attr:keep: int = 1"}));
  return *producer;
}

NodeDef Node(const std::string& name, DataType dtype, int keep) {
  NodeDef node;
  TF_CHECK_OK(NodeDefBuilder(name, &Producer())
                  .Input("in", 0, dtype)
                  .Attr("T", dtype)
                  .Attr("keep", keep)
                  .Finalize(&node));
  return node;
}

Status Downgrade(const NodeDef& node, GraphDef* graph) {
  const OpList consumer = ListOf(Spec(kV1));
  const OpList producer = ListOf(Producer());
  OpListOpRegistry producer_registry(&producer);
  *graph->add_node() = node;
  return DowngradeGraphDef(consumer, producer_registry, graph);
}

void TestDowngrade() {
  GraphDef graph;
  TF_CHECK_OK(Downgrade(Node("z", DT_FLOAT, 1), &graph));
  CHECK_EQ(graph.node(0).attr().count("keep"), 0);
  CHECK_EQ(graph.node(0).attr().at("T").type(), DT_FLOAT);

  graph.Clear();
  Status status = Downgrade(Node("z", DT_FLOAT, 2), &graph);
  std::printf("downgrade keep=2: %s\n", status.ToString().c_str());
  CHECK(absl::StrContains(customops::StatusMessage(status),
                          "node 'z' (CustomOps>Synthetic) sets keep = 2, not "
                          "its default 1; the consumer's release has no attr "
                          "'keep'"))
      << status;

  graph.Clear();
  status = Downgrade(Node("u", DT_UINT8, 1), &graph);
  std::printf("downgrade uint8: %s\n", status.ToString().c_str());
  CHECK(absl::StrContains(customops::StatusMessage(status),
                          "node 'u' (CustomOps>Synthetic) "
                          "does not fit the consumer's "
                          "release"))
      << status;
  CHECK(absl::StrContains(customops::StatusMessage(status), "uint8")) << status;

  graph.Clear();
  NodeDef unknown = Node("n", DT_FLOAT, 1);
  unknown.set_op("CustomOps>Newer");
  status = Downgrade(unknown, &graph);
  CHECK(absl::StrContains(customops::StatusMessage(status),
                          "uses op CustomOps>Newer, which the consumer's "
                          "release does not have"))
      << status;
}

}  // namespace
}  // namespace customops_compat
}  // namespace tensorflow

int main() {
  tensorflow::customops_compat::TestIncompatibleChanges();
  tensorflow::customops_compat::TestOpRemovedAndFileCollision();
  tensorflow::customops_compat::TestCompatibleEvolutionAndUpdate();
  tensorflow::customops_compat::TestDowngrade();
  std::printf("op_compat_test: all checks passed\n");
  return 0;
}
