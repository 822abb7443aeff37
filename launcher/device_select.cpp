#include "launcher/device_select.h"

#include "comm/mpi_check.h"
#include "base/error.h"

namespace dsv4 {

int node_local_rank(MPI_Comm comm) {
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int local = 0;
  MPI_CHECK(MPI_Comm_rank(node, &local));
  MPI_CHECK(MPI_Comm_free(&node));
  return local;
}

int select_device(const std::vector<int>& devices, int rank, int n_ranks, int local_rank) {
  if (devices.empty()) return local_rank;
  if (static_cast<int>(devices.size()) != n_ranks)
    throw Error(cat("devices: ", devices.size(), " entries for ", n_ranks,
                    " ranks (list one GPU per rank, or leave devices out)"));
  return devices[static_cast<size_t>(rank)];
}

}  // namespace dsv4
