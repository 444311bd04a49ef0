#!/bin/bash
# MPIEXEC ARGS...: runs MPIEXEC ARGS with a session directory of its own, removed when the job ends.
# OpenMPI 4 keeps every job's session files under one directory per user and host, and two jobs that start
# and end at once race on creating and removing it: the loser exits before any rank runs ("A call to mkdir
# was unable to create the desired directory ... File exists", open-mpi/ompi#8510; seen at ctest -j 2).
# The engine's launcher does the same for its own jobs (src/cli/run_setup.cc, SessionBase).
set -u
mpiexec=$1
shift
if [[ -n "${OMPI_MCA_orte_tmpdir_base:-}" ]]; then
  exec "$mpiexec" "$@"
fi
base=$(mktemp -d "${TMPDIR:-/tmp}/sp-mpi-XXXXXX") || exec "$mpiexec" "$@"
trap 'rm -rf "$base"' EXIT
"$mpiexec" --mca orte_tmpdir_base "$base" "$@"
