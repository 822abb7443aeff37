// kernel_base_name (kernels/step_knockout.h): the knockout names kernels as
// scripts/kernel_times.py names ncu's rows, so the two tables can be read side by side;
// split_kernel_names reads --knockout-skip's list of such names.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kernels/step_knockout.h"

namespace dsv4 {

TEST_CASE("kernel_base_name drops the return type, namespaces, parameters and spaces") {
  CHECK(kernel_base_name("void dsv4::cuda::(anonymous namespace)::sink_split_kernel(const float *, int, int, int, "
                         "const float *, const int *, int, int, float, bool, float *, float *)") ==
        "sink_split_kernel");
  CHECK(kernel_base_name("void dsv4::cuda::gemv_tc_kernel<dsv4::cuda::TcFp8Run, 1, 1, 2>(dsv4::cuda::TcFp8Run, "
                         "dsv4::cuda::GemvArgs)") == "gemv_tc_kernel<TcFp8Run,1,1,2>");
  CHECK(kernel_base_name("void dsv4::<unnamed>::hc_pre_norm_kernel<4>(dsv4::cuda::HcArgs)") ==
        "hc_pre_norm_kernel<4>");
  CHECK(kernel_base_name("embed_kernel") == "embed_kernel");  // a name not demangled stays
}

TEST_CASE("split_kernel_names splits at commas outside template arguments and parentheses") {
  CHECK(split_kernel_names("") == std::vector<std::string>{});
  CHECK(split_kernel_names("embed_kernel") == std::vector<std::string>{"embed_kernel"});
  CHECK(split_kernel_names("a,expert_fp4_kernel<2,true,2,true,(FragCodes)1>,,gemv_tc_kernel<TcFp8Run,1,1,2>,b") ==
        std::vector<std::string>{"a", "expert_fp4_kernel<2,true,2,true,(FragCodes)1>",
                                 "gemv_tc_kernel<TcFp8Run,1,1,2>", "b"});
  CHECK(split_kernel_names("k<f(1,2)>,m") == std::vector<std::string>{"k<f(1,2)>", "m"});
}

}  // namespace dsv4
