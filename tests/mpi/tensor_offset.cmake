# Prints data_offsets[0] of tensor TENSOR in the safetensors shard SHARD whose JSON
# header is HEADER_LEN bytes long (after the 8-byte length).
file(READ "${SHARD}" header OFFSET 8 LIMIT ${HEADER_LEN})
string(JSON begin GET "${header}" "${TENSOR}" data_offsets 0)
execute_process(COMMAND ${CMAKE_COMMAND} -E echo "${begin}")
