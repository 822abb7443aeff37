// CUDA weight memory vs the host generator (issue 11): every tensor of the tiny model
// (both expert recipes) and Flash-size samples generated in device memory equal the host
// generator's bytes, which equal dsv4-mkckpt's files (tests/unit/model); the device value
// scan finds a corrupted element like the host scan.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/ops.h"
#include "model/census.h"
#include "model/presets.h"
#include "model/synthetic_host.h"

using namespace dsv4;

namespace {

std::vector<uint8_t> device_bytes(const WeightMemory& m, const TensorView& v) {
  std::vector<uint8_t> b(v.nbytes);
  m.read(v, 0, v.nbytes, b.data());
  return b;
}

// Tensors of `plan` whose device bytes differ from the host generator's.
int differing(Ops& ops, const std::vector<SynthTensor>& plan) {
  auto mem = ops.make_weight_memory();
  REQUIRE(mem->device());
  int bad = 0;
  for (const SynthTensor& t : plan) {
    const TensorView v = mem->generate(t);
    CHECK(v.on_device);
    if (device_bytes(*mem, v) != synth_generate_host(t)) {
      ++bad;
      MESSAGE("differs: " << t.name);
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("weight memory twin: every tiny tensor generated on the GPU equals the host generator") {
  auto ops = make_cuda_ops(0);
  for (ExpertRecipe recipe : {ExpertRecipe::nvfp4, ExpertRecipe::mxfp4}) {
    CensusOptions co;
    co.trunk_experts = recipe;
    const ModelConfig c = tiny_preset();
    const auto plan = synth_plan(tensor_census(c, co), c.n_routed_experts, 11);
    CHECK(differing(*ops, plan) == 0);
  }
}

TEST_CASE("weight memory twin: Flash-size tensors of every kind") {
  auto ops = make_cuda_ops(0);
  const ModelConfig c = flash_trunk_preset(3);
  CensusOptions co;
  const auto census = tensor_census(c, co);
  std::vector<SynthTensor> sample;
  for (const SynthTensor& t : synth_plan(census, c.n_routed_experts, 5)) {
    const std::string& n = t.name;
    const bool pick = n.rfind("layers.2.", 0) == 0 &&
                      (n.find(".experts.") == std::string::npos || n.find(".experts.7.") != std::string::npos);
    if (pick || n == "layers.0.ffn.gate.tid2eid") sample.push_back(t);
  }
  CHECK(sample.size() > 40);
  CHECK(differing(*ops, sample) == 0);
}

TEST_CASE("weight memory twin: the device value scan finds the first refused element") {
  auto ops = make_cuda_ops(0);
  auto mem = ops->make_weight_memory();
  CensusOptions co;
  const ModelConfig c = tiny_preset();
  for (const SynthTensor& t : synth_plan(tensor_census(c, co), c.n_routed_experts, 1)) {
    if (t.name != "layers.1.attn.wq_a.scale" && t.name != "layers.0.hc_attn_base" &&
        t.name != "layers.2.ffn.experts.0.w3.weight_scale")
      continue;
    CAPTURE(t.name);
    const TensorView v = mem->generate(t);
    const bool block_scale = t.kind == SynthKind::nv_scales;
    CHECK(mem->first_fault(v, block_scale).fault == ValueFault::none);
    std::vector<uint8_t> host = device_bytes(*mem, v);
    const size_t w = dtype_size(v.dtype), at = 2;
    if (v.dtype == DType::F32) std::memset(host.data() + w * at, 0xFF, w);        // NaN
    else if (v.dtype == DType::F8_E8M0) host[at] = 0xFF;                          // NaN code
    else host[at] |= 0x80;                                                        // sign bit
    REQUIRE(cudaMemcpy(const_cast<uint8_t*>(v.data), host.data(), host.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    const FaultAt device = mem->first_fault(v, block_scale);
    const FaultAt on_host = first_fault_host(v.dtype, host.data(), host.size(), block_scale);
    CHECK(device.element == 2);
    CHECK(device.fault == on_host.fault);
    CHECK(device.fault != ValueFault::none);
  }
}
