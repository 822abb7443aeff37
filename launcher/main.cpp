// dsv4-stage: `mpirun -np P dsv4-stage --config C` or, for one stage, `dsv4-stage --config C`.
#include "launcher/rank_process.h"

int main(int argc, char** argv) { return dsv4::run_process(argc, argv); }
