// Ops::on_line's argument check, shared by the backends.
#include "base/error.h"
#include "kernels/ops.h"

namespace dsv4 {

void require_op_line(int line) {
  if (line < 0 || line >= Ops::kOpLines)
    throw Error(cat("Ops::on_line: line ", line, " outside [0, ", Ops::kOpLines, ")"));
}

}  // namespace dsv4
