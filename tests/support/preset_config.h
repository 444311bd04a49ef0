// A bundled preset with `--set` overrides applied, as the CLI builds it, for tests that need a RunConfig
// without running anything (configuration keys, plans, contracts, the ledger model).
// Reference: docs/testing.md ("Shared test helpers").
#pragma once

#include <string>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"
#include "temp_dir.h"

namespace sp::test {

// configs/<preset>.toml with each KEY=VALUE of `sets` applied in order; the first error is the result.
inline Result<config::RunConfig> preset_config(const std::string& preset, const std::vector<std::string>& sets) {
  auto j = config::read_preset(source_dir() + "/configs", preset);
  if (!j.ok()) return j.status();
  for (const std::string& s : sets) SP_RETURN_IF_ERROR(config::apply_override(*j, s));
  return config::RunConfig::from_json(*j);
}

}  // namespace sp::test
