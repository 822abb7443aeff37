# Prints the shard file of tensor TENSOR from the checkpoint index INDEX.
file(READ "${INDEX}" json)
string(JSON shard GET "${json}" weight_map "${TENSOR}")
execute_process(COMMAND ${CMAKE_COMMAND} -E echo "${shard}")
