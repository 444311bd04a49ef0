#include "ckpt/manifest.h"

#include <fmt/format.h>

#include "ckpt/format.h"
#include "ckpt/names.h"
#include "comm/process_grid.h"
#include "core/hash.h"
#include "core/json_io.h"

namespace sp::ckpt {
using nlohmann::json;

json Topology::to_json() const {
  json j = {{"dp", dp}, {"tp", tp}, {"pp", pp}, {"zero", zero}, {"axis_order", axis_order}, {"world", world()}};
  if (servers > 0) j["servers"] = servers;
  return j;
}

std::string Topology::describe() const {
  return fmt::format("dp {} × tp {} × pp {}, zero {} ({}){}", dp, tp, pp, zero, axis_order,
                     servers > 0 ? fmt::format(" + {} parameter server{}", servers, servers == 1 ? "" : "s") : "");
}

json Manifest::content() const {
  json shard_list = json::array();
  for (const ShardRecord& s : shards)
    shard_list.push_back({{"rank", s.rank},
                          {"coords", s.coords},
                          {"file", s.file},
                          {"bytes", s.bytes},
                          {"sha256", s.sha256},
                          {"sha256_chunks", s.sha256_chunks}});
  json ev = json::object();
  for (const auto& [name, p] : evidence) ev[name] = {{"bytes", p.bytes}, {"sha256", p.sha256}};
  json optimizer = {{"steps_taken", optimizer_steps}};
  if (!loss_scaler.is_null()) optimizer["loss_scaler"] = loss_scaler;
  return {{"format", kManifestFormat}, {"format_version", kFormatVersion}, {"step", step},
          {"contract", contract},      {"contract_hash", contract_hash},   {"topology", topology.to_json()},
          {"optimizer", optimizer},    {"loader_cursor", loader_cursor},   {"evidence", ev},
          {"shards", shard_list}};
}

void Manifest::seal() { digest = sha256_hex(content().dump()); }

json Manifest::to_json() const {
  json j = content();
  j["digest"] = digest;
  return j;
}

std::string Manifest::to_text() const { return to_json().dump(2) + "\n"; }

uint64_t Manifest::total_bytes() const {
  uint64_t n = 0;
  for (const ShardRecord& s : shards) n += s.bytes;
  return n;
}

Result<model::LlamaConfig> Manifest::model_config() const {
  if (!contract.contains("config") || !contract["config"].is_object() || !contract["config"].contains("model"))
    return corrupt("checkpoint step {}: the contract has no config.model", step);
  auto c = model::LlamaConfig::from_json(contract["config"]["model"]);
  if (!c.ok()) return c.status().with_context(fmt::format("checkpoint step {}: contract config.model", step));
  return c;
}

namespace {

Result<Topology> parse_topology(const json& j, const std::string& label) {
  JsonFields f(j, label, "topology");
  const bool ps = j.is_object() && j.contains("servers");
  SP_RETURN_IF_ERROR(ps ? f.expect_keys({"dp", "tp", "pp", "zero", "axis_order", "world", "servers"})
                        : f.expect_keys({"dp", "tp", "pp", "zero", "axis_order", "world"}));
  Topology t;
  int64_t servers = 0;
  if (ps) {
    SP_ASSIGN_OR_RETURN(servers, f.integer("servers", 1, kMaxWorld));
  }
  SP_ASSIGN_OR_RETURN(const int64_t dp, f.integer("dp", 1, kMaxWorld));
  SP_ASSIGN_OR_RETURN(const int64_t tp, f.integer("tp", 1, kMaxWorld));
  SP_ASSIGN_OR_RETURN(const int64_t pp, f.integer("pp", 1, kMaxWorld));
  SP_ASSIGN_OR_RETURN(const int64_t zero, f.integer("zero", 0, 3));
  SP_ASSIGN_OR_RETURN(const int64_t world, f.integer("world", 1, kMaxWorld));
  SP_ASSIGN_OR_RETURN(t.axis_order, f.string("axis_order"));
  if (dp * tp * pp + servers != world)
    return corrupt("{}: topology.world = {} but dp × tp × pp{} = {} × {} × {}{} = {}", label, world,
                   ps ? " + servers" : "", dp, tp, pp, ps ? fmt::format(" + {}", servers) : "", dp * tp * pp + servers);
  t.servers = static_cast<int>(servers);
  t.dp = static_cast<int>(dp);
  t.tp = static_cast<int>(tp);
  t.pp = static_cast<int>(pp);
  t.zero = static_cast<int>(zero);
  auto grid = comm::ProcessGrid::create(t.dp, t.tp, t.pp, t.axis_order, t.dp * t.tp * t.pp);
  if (!grid.ok()) return corrupt("{}: topology: {}", label, grid.status().message());
  return t;
}

Result<ShardRecord> parse_shard_record(const json& j, size_t index, const std::string& label) {
  JsonFields f(j, label, fmt::format("shards[{}]", index));
  SP_RETURN_IF_ERROR(f.expect_keys({"rank", "coords", "file", "bytes", "sha256", "sha256_chunks"}));
  ShardRecord s;
  SP_ASSIGN_OR_RETURN(const int64_t rank, f.integer("rank", 0, kMaxWorld - 1));
  if (rank != static_cast<int64_t>(index)) return f.error("rank", fmt::format("= {}, expected {}", rank, index));
  s.rank = static_cast<int>(rank);
  SP_ASSIGN_OR_RETURN(s.coords, f.string("coords"));
  SP_ASSIGN_OR_RETURN(s.file, f.string("file"));
  SP_RETURN_IF_ERROR(check_path_component(s.file, fmt::format("{}: shards[{}].file", label, index)));
  if (s.file != shard_file_name(s.rank))
    return f.error("file", fmt::format("= {:?}, expected {:?}", s.file, shard_file_name(s.rank)));
  SP_ASSIGN_OR_RETURN(const int64_t bytes, f.integer("bytes", 8, INT64_MAX));
  s.bytes = static_cast<uint64_t>(bytes);
  SP_ASSIGN_OR_RETURN(s.sha256, f.sha256("sha256"));
  SP_ASSIGN_OR_RETURN(const json* chunks, f.array("sha256_chunks"));
  if (chunks->size() != chunk_count(s.bytes, kShaChunkBytes))
    return f.error("sha256_chunks",
                   fmt::format("has {} digests, a file of {} bytes has {} chunks of {} bytes", chunks->size(), s.bytes,
                               chunk_count(s.bytes, kShaChunkBytes), kShaChunkBytes));
  for (size_t c = 0; c < chunks->size(); ++c) {
    const json& d = (*chunks)[c];
    if (!d.is_string() || !is_sha256_hex(d.get_ref<const std::string&>()))
      return f.error(fmt::format("sha256_chunks[{}]", c), "is not a lowercase hex SHA-256");
    s.sha256_chunks.push_back(d.get<std::string>());
  }
  return s;
}

}  // namespace

Result<Manifest> Manifest::parse(std::string_view text, const std::string& label) {
  if (text.size() > kMaxManifestBytes)
    return corrupt("{}: {} bytes, more than the {} a manifest may have", label, text.size(), kMaxManifestBytes);
  SP_ASSIGN_OR_RETURN(json j, parse_json_strict(text, label, kMaxJsonDepth));
  JsonFields f(j, label, "manifest");
  SP_RETURN_IF_ERROR(f.expect_keys({"format", "format_version", "step", "contract", "contract_hash", "topology",
                                    "optimizer", "loader_cursor", "evidence", "shards", "digest"}));
  SP_ASSIGN_OR_RETURN(const std::string format, f.string("format"));
  if (format != kManifestFormat)
    return f.error("format", fmt::format("= {:?}, expected {:?}", format.substr(0, 80), kManifestFormat));
  SP_ASSIGN_OR_RETURN(const int64_t version, f.integer("format_version", 0, INT32_MAX));
  if (version < kOldestFormatVersion || version > kFormatVersion)
    return corrupt("{}: checkpoint format version {} is not supported (this build reads versions {} to {})", label,
                   version, kOldestFormatVersion, kFormatVersion)
        .with_hint("use the shardproof build that wrote it, or re-export the weights");
  // The digest first: any flipped bit in the rest is reported as what it is, damage.
  SP_ASSIGN_OR_RETURN(const std::string digest, f.sha256("digest"));
  json body = j;
  body.erase("digest");
  const std::string computed = sha256_hex(body.dump());
  if (computed != digest)
    return corrupt("{}: manifest content does not match its digest (stored {}, computed {})", label, digest, computed)
        .with_hint(
            "the manifest was damaged or edited after the checkpoint was committed; an older checkpoint may still "
            "be usable");

  Manifest m;
  m.digest = digest;
  SP_ASSIGN_OR_RETURN(m.step, f.integer("step", 0, kMaxStep));
  SP_ASSIGN_OR_RETURN(const json* contract, f.object("contract"));
  m.contract = *contract;
  SP_ASSIGN_OR_RETURN(m.contract_hash, f.sha256("contract_hash"));
  if (!m.contract.contains("hash") || m.contract["hash"] != m.contract_hash)
    return corrupt("{}: contract_hash {} differs from the embedded contract's hash", label, m.contract_hash);
  SP_ASSIGN_OR_RETURN(const json* topo, f.object("topology"));
  SP_ASSIGN_OR_RETURN(m.topology, parse_topology(*topo, label));
  SP_ASSIGN_OR_RETURN(const json* opt, f.object("optimizer"));
  {
    JsonFields o(*opt, label, "optimizer");
    if (opt->contains("loss_scaler")) {
      SP_RETURN_IF_ERROR(o.expect_keys({"steps_taken", "loss_scaler"}));
      SP_ASSIGN_OR_RETURN(const json* ls, o.object("loss_scaler"));
      m.loss_scaler = *ls;  // validated against the run's [fp16] settings when it is restored
    } else {
      SP_RETURN_IF_ERROR(o.expect_keys({"steps_taken"}));
    }
    SP_ASSIGN_OR_RETURN(m.optimizer_steps, o.integer("steps_taken", 0, kMaxStep));
    if (m.optimizer_steps > m.step)
      return o.error("steps_taken", fmt::format("= {} exceeds the step {}", m.optimizer_steps, m.step));
  }
  SP_ASSIGN_OR_RETURN(const json* cursor, f.object("loader_cursor"));
  m.loader_cursor = *cursor;
  SP_ASSIGN_OR_RETURN(const json* ev, f.object("evidence"));
  for (const auto& [name, v] : ev->items()) {
    SP_RETURN_IF_ERROR(check_path_component(name, label + ": evidence file"));
    JsonFields e(v, label, "evidence." + name);
    SP_RETURN_IF_ERROR(e.expect_keys({"bytes", "sha256"}));
    FilePrefix p;
    SP_ASSIGN_OR_RETURN(const int64_t bytes, e.integer("bytes", 0, INT64_MAX));
    p.bytes = static_cast<uint64_t>(bytes);
    SP_ASSIGN_OR_RETURN(p.sha256, e.sha256("sha256"));
    m.evidence[name] = p;
  }
  SP_ASSIGN_OR_RETURN(const json* shards, f.array("shards"));
  if (shards->size() != static_cast<size_t>(m.topology.world()))
    return corrupt("{}: {} shards listed for a world of {} ranks ({})", label, shards->size(), m.topology.world(),
                   m.topology.describe());
  for (size_t i = 0; i < shards->size(); ++i) {
    SP_ASSIGN_OR_RETURN(ShardRecord s, parse_shard_record((*shards)[i], i, label));
    m.shards.push_back(std::move(s));
  }
  return m;
}

std::string Latest::to_text() const {
  return json{{"format", kLatestFormat},
              {"step", step},
              {"dir", step_dir_name(step)},
              {"manifest_digest", manifest_digest}}
             .dump() +
         "\n";
}

Result<Latest> Latest::parse(std::string_view text, const std::string& label) {
  if (text.size() > kMaxLatestBytes)
    return corrupt("{}: {} bytes, more than the {} LATEST may have", label, text.size(), kMaxLatestBytes);
  SP_ASSIGN_OR_RETURN(json j, parse_json_strict(text, label, 2));
  JsonFields f(j, label, "LATEST");
  SP_RETURN_IF_ERROR(f.expect_keys({"format", "step", "dir", "manifest_digest"}));
  SP_ASSIGN_OR_RETURN(const std::string format, f.string("format"));
  if (format != kLatestFormat)
    return f.error("format", fmt::format("= {:?}, expected {:?}", format.substr(0, 80), kLatestFormat));
  Latest l;
  SP_ASSIGN_OR_RETURN(l.step, f.integer("step", 0, kMaxStep));
  SP_ASSIGN_OR_RETURN(const std::string dir, f.string("dir"));
  if (dir != step_dir_name(l.step))
    return f.error(
        "dir", fmt::format("= {:?} disagrees with step {} ({:?})", dir.substr(0, 80), l.step, step_dir_name(l.step)));
  SP_ASSIGN_OR_RETURN(l.manifest_digest, f.sha256("manifest_digest"));
  // Exactly the bytes to_text() writes: a flipped bit in the layout is damage too.
  if (l.to_text() != text) return corrupt("{}: LATEST is not in its canonical form (edited or damaged)", label);
  return l;
}

}  // namespace sp::ckpt
