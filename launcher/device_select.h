// GPU selection (ARCHITECTURE.md "Ranks and roles"): the rank's index among the ranks of
// its node, from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) so any MPI launcher works,
// unless the run config's `devices` pins one device per rank.
#pragma once
#include <mpi.h>

#include <vector>

namespace dsv4 {

// Collective over `comm`: this rank's index among the ranks sharing its node.
int node_local_rank(MPI_Comm comm);

// `devices` empty: local_rank; else devices[rank] (exactly one entry per rank).
int select_device(const std::vector<int>& devices, int rank, int n_ranks, int local_rank);

}  // namespace dsv4
