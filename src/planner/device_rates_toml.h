// The [device.measured] table of a cluster file (docs/formats/cluster.md), read and written; cluster.cc's
// strict reader calls read_device_rates for it, cluster_to_toml writes it with device_rates_to_toml.
#pragma once

#include <string>
#include <vector>

#include "config/toml_fields.h"
#include "planner/device_rates.h"

namespace sp::planner {

// Reads [device.measured] under `device` when present (every problem appended to `errs`, naming where).
void read_device_rates(config::TomlFields& device, const std::string& origin, std::vector<std::string>* errs,
                       DeviceRates& out);
// The table's TOML text ("" when `r` is empty), to be appended after the [device] tables.
std::string device_rates_to_toml(const DeviceRates& r);

}  // namespace sp::planner
