// The engine runs the CPU's fast OpenBLAS kernels by itself: at the top of main(), before MPI_Init and
// before any BLAS call, a process whose OpenBLAS chose an older core than the CPU supports (Debian's
// 0.3.21 falls back to its SSE3 "Prescott" kernels on Xeons newer than it) re-executes itself once with
// OPENBLAS_CORETYPE set to the right core (kernels/blas_core.h). OpenBLAS reads that variable only when
// it loads, so setting it later does nothing; exec keeps the pid, argv, open files and MPI's environment.
// Not done when the user set OPENBLAS_CORETYPE (theirs is respected, whatever it says), when the core is
// already right or foreign (AMD "Zen" on an AVX2 host: nothing happens), or on the second pass: the
// re-executed process carries SP_BLAS_CORE_FROM (the core OpenBLAS had chosen), which stops any loop.
// docs/performance.md §"The OpenBLAS core"; the evidence names the core (contract engine.blas, topology).
#pragma once

#include <string>

namespace sp::cli {

// Re-executes /proc/self/exe with the faster core when it applies; returns when it does not (or when
// exec fails: the run then goes on with OpenBLAS's own choice, which the evidence names).
void select_blas_core(char** argv);

// One line for `shardproof --version`: the core that runs and who chose it, e.g.
// "SkylakeX (selected by shardproof: OpenBLAS chose Prescott on an avx512_bf16 CPU)".
std::string blas_core_origin();

}  // namespace sp::cli
