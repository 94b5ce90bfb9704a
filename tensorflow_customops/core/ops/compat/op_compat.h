// GraphDef compatibility of the CustomOps> ops: the op history, the checks
// that guard it, and the rewrite of GraphDefs for older consumers. The
// compatibility rules themselves are TensorFlow's (op_def_util.h).

#ifndef TENSORFLOW_CUSTOMOPS_CORE_OPS_COMPAT_OP_COMPAT_H_
#define TENSORFLOW_CUSTOMOPS_CORE_OPS_COMPAT_OP_COMPAT_H_

#include <map>
#include <string>
#include <vector>

#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_def.pb.h"

namespace tensorflow {
namespace customops_compat {

inline constexpr char kOpPrefix[] = "CustomOps>";
inline constexpr char kUpdateCommand[] =
    "bazel run //tensorflow_customops/core/ops/compat:update_ops_history";

// Op name -> every recorded version of its spec, oldest first, docs stripped.
using OpHistory = std::map<std::string, OpList>;

// The history file of an op: "CustomOps>Foo" -> "CustomOps_Foo.pbtxt".
// '>' is not allowed in file names on Windows.
std::string HistoryFileName(const std::string& op_name);

// The registered ops whose names start with kOpPrefix, sorted by name, with
// their docs.
OpList RegisteredCustomOps(const OpRegistry& registry);

// `op_def` without docs: the form kept in the history.
OpDef StripDocs(const OpDef& op_def);

// Changes that no update may record: `current` is incompatible with a
// recorded version, an op disappeared, a flag changed, or two ops share a
// history file name. Each message names the op, the version and the rule.
std::vector<std::string> IncompatibleChanges(const OpList& current,
                                             const OpHistory& history);

// Differences that the updater records: an op with no history, a spec that
// differs from its latest version, or an out-of-date registered_ops/
// (`recorded`).
std::vector<std::string> PendingUpdates(const OpList& current,
                                        const OpHistory& history,
                                        const OpList& recorded);

// Appends each changed spec to `history`; returns the ops that changed.
std::vector<std::string> UpdateHistory(const OpList& current,
                                       OpHistory* history);

// Reads and writes the history folder (one file per op).
Status ReadHistory(const std::string& dir, OpHistory* history);
Status WriteHistory(const std::string& dir, const OpHistory& history);

// Reads a text-format OpList file, or a folder of them (registered_ops/,
// whose ops it sorts by name).
Status ReadOpList(const std::string& path, OpList* ops);

// Writes registered_ops/: one file per op, as registered now, with docs (the
// history strips them). One file per op, so that adding an op touches no
// other op's files.
Status WriteRegisteredOps(const std::string& dir, const OpList& ops);

// Prepares `graph` for a consumer whose library registers `consumer_ops`:
// attrs that the consumer's specs lack are removed where they equal the
// producer's default, as TensorFlow's RemoveNewDefaultAttrsFromGraphDef does.
// Fails, naming node, op and attr, when a node still needs something the
// consumer lacks (an attr with a non-default value, a new dtype, a new op).
// Only CustomOps> nodes are touched, in the graph and its functions.
Status DowngradeGraphDef(const OpList& consumer_ops,
                         const OpRegistryInterface& producer, GraphDef* graph);

}  // namespace customops_compat
}  // namespace tensorflow

#endif  // TENSORFLOW_CUSTOMOPS_CORE_OPS_COMPAT_OP_COMPAT_H_
