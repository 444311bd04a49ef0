// The engine's version: the git revision the binary was configured from (`git describe --always --dirty`),
// frozen into every contract. It lives in one generated source file (core_revision.cc in the build tree,
// written by src/core/CMakeLists.txt), so a new commit recompiles that file alone, not every target.
#pragma once

namespace sp {

const char* git_revision();

}  // namespace sp
