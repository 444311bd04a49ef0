// The lab catalogue (docs/labs.md) and its rendering. The catalogue is a table: adding a lab is adding
// one entry. Each entry is checked by tests/unit/labs_test.cc and again by `lab run` before launch
// (validate_lab), so a broken preset or an inapplicable fault is refused with exit 2, never run.
#include "cli/labs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "cli/run_setup.h"
#include "comm/process_grid.h"
#include "evidence/faults.h"
#include "parallel/plan.h"
#include "proof/protocol.h"

namespace sp::cli {

const std::vector<Lab>& lab_catalogue() {
  static const std::vector<Lab> k = {
      {.key = "LSL-A",
       .section = "4",
       .title = "Distributed training (the chapter)",
       .mechanism =
           "Every strategy in the chapter splits one training step over several workers; the split is only worth "
           "having if it computes the same training as one device. This lab runs the whole proof on a two-axis split "
           "(2 data-parallel replicas x 2 pipeline stages) next to the single-device reference, and shows that the "
           "split changed where the work happened and nothing else.",
       .sets = {"parallel.dp=2", "parallel.pp=2", "train.steps=6"},
       .world = 4,
       .fault = "data-order@2:1",
       .observe =
           {"summary.md: the verdict and one line per gate criterion; each names the file it was derived from.",
            "parallel/checksums.jsonl against reference/checksums.jsonl (dp = tp = pp = 1): the same `loss` bits and "
            "the same `grad`/`param` digests at every step (dp and pp are bitwise classes in deterministic mode).",
            "parallel/topology.json: each rank's (dp, pp) coordinates and the dp[...] and pp[...] groups the 4 ranks "
            "form.",
            "the first-divergence line (summary.md, printed before the verdict): in fault/, rank 1 drew step 2's "
            "micro-batches with another seed; every collective still matched, so the trace is clean and the per-layer "
            "activation view catches it first: the `embed` output of rank 1's micro-batches differs at step 2 "
            "(fault/activations/ against reference/activations/), before the loss does.",
            "recovery/checksums.jsonl: resumed from parallel/'s step-3 checkpoint without the fault, the run follows "
            "the reference trajectory again, final eval included."},
       .cannot_extrapolate =
           {"One correct configuration proves that configuration: another (dp, tp, pp, zero, schedule) or another "
            "model shape needs its own proof.",
            "A clean gate means no divergence was observed in 6 steps, not that none can occur in 100k steps."}},

      {.key = "LSL-B",
       .section = "4.1",
       .title = "Overview of distributed training",
       .mechanism =
           "One device bounds the model and batch by its memory and the run time by its compute, so the work is split. "
           "The first split is the batch: each worker computes the gradient of part of the global batch and the parts "
           "are summed. The training objective must not change with the split: the loss is the mean over every target "
           "token of the global batch, whatever share each rank holds.",
       .sets = {"parallel.dp=2", "train.steps=6"},
       .world = 2,
       .fault = "wrong-loss-scale@2:1",
       .observe =
           {"parallel/metrics.jsonl: `loss` equals reference/metrics.jsonl's at every step; `step_s`, `compute_s` and "
            "`tokens_per_s` show where the time went. They are information: gate.json marks throughput as not "
            "required.",
            "fault/checksums.jsonl: at step 2 the `grad` digests differ from the reference while the `loss` record "
            "does not. Rank 1 normalised its gradient by its own micro-batch's tokens instead of the global batch's, a "
            "mistake a loss curve does not show.",
            "docs/formats/checksums.md explains the digest: it is computed over logical indices, so a 2-rank run and "
            "a 1-rank run produce comparable digests for the same tensor."},
       .cannot_extrapolate =
           {"Speed-up: 2 ranks share 2 busy cores, so the tokens/s ratio to the reference measures contention, not "
            "parallel efficiency.",
            "The compute/communication balance of a 4M-parameter model on shared memory is nothing like that of a "
            "large model over a network."}},

      {.key = "LSL-C",
       .section = "4.2",
       .title = "Parallel strategies",
       .mechanism =
           "Data parallelism replicates the model and splits the batch; model parallelism splits the model itself. "
           "Here both at once on orthogonal groups, dp 2 x tp 2: each strategy talks on its own groups, in its own "
           "phase, with its own kind of payload (activations for tp, gradients for dp).",
       .sets = {"parallel.dp=2", "parallel.tp=2", "train.steps=6"},
       .world = 4,
       .fault = "drop-tp-allreduce@2",
       .observe =
           {"parallel/topology.json: groups tp[dp0.pp0] = [0, 1], tp[dp1.pp0] = [2, 3], dp[tp0.pp0] = [0, 2], "
            "dp[tp1.pp0] = [1, 3] (axis order tp-dp-pp: tp peers are adjacent ranks).",
            "parallel/trace/rank-*.jsonl: records on tp groups have phase forward or backward (all_reduce of "
            "activations and their gradients); records on dp groups have phase grad_sync (all_to_all + all_gather of "
            "gradients).",
            "parallel/comm_predicted.json: the operations and bytes per step, group and phase predicted from the plan "
            "alone; the gate requires the traced traffic to equal it.",
            "the first-divergence line: the forward all_reduce after o_proj of the first block is missing on the tp "
            "groups at step 2; the trace-vs-prediction view catches it before any number is compared.",
            "gate.json, gradient criterion: tp changes the summation order inside matrix products, so its class is a "
            "documented tolerance (docs/equivalence.md), where dp alone is bitwise."},
       .cannot_extrapolate =
           {"Which strategy is cheaper depends on link bandwidths and model shape; on one host with shared memory "
            "every group has the same link, so this run cannot rank the strategies."}},

      {.key = "LSL-D",
       .section = "4.2.1",
       .title = "Data parallelism",
       .mechanism =
           "Each replica holds the whole model, runs M/dp of the step's micro-batches, and the replicas sum their "
           "gradients before the same update. The deterministic all-reduce is an all_to_all that hands rank r every "
           "replica's chunk r (r sums it in the canonical order) followed by an all_gather of the summed chunks, so "
           "the sum has the single device's bits.",
       .sets = {"parallel.dp=2", "train.steps=6"},
       .world = 2,
       .fault = "skip-grad-allreduce@2",
       .observe = {"parallel/trace/rank-00000.jsonl: per step, phase grad_sync on dp[tp0.pp0]: an all_to_all then an "
                   "all_gather per unit; each moves (n-1)/n of the unit's gradient per rank.",
                   "parallel/checksums.jsonl against reference/checksums.jsonl (dp = 1): identical `grad` and `param` "
                   "digests at every step.",
                   "parallel/metrics.jsonl: no line carries `diverging_ranks` (written only when a replica differs "
                   "from its dp group's rank 0): after every update the replicas hold the same bits.",
                   "fault/ and the first-divergence line: every rank skips the sync of one unit at step 2, so the "
                   "ranks stay in step (no hang) and silently diverge; the trace-vs-prediction view reports grad_sync "
                   "bytes below the plan at step 2 on the dp group."},
       .cannot_extrapolate =
           {"Gradient bucketing and overlapping communication with backward (as PyTorch DDP does) are not modelled: "
            "units are synchronised after their last micro-batch, in a fixed order.",
            "The bitwise claim holds for parallel.reduction = \"deterministic\"; MPI's own all-reduce (\"fast\") is "
            "equivalent only within a tolerance."}},

      {.key = "LSL-E",
       .section = "4.2.2",
       .title = "Model parallelism: tensor and pipeline",
       .mechanism =
           "Tensor parallelism splits each block's matrices: attention by heads (q/k/v by output rows, o_proj by input "
           "columns), the MLP by ffn columns and rows, the embedding and LM head by vocabulary, with one all_reduce "
           "after each row-split product in forward and the conjugate one in backward (Megatron-LM). Pipeline "
           "parallelism splits the 4 layers into 2 stages that pass activations forward and their gradients backward "
           "point to point, 4 micro-batches per step in the 1F1B order.",
       .sets = {"parallel.tp=2", "parallel.pp=2", "train.steps=6"},
       .world = 4,
       .fault = "pp-microbatch-swap@2",
       .observe =
           {"parallel/trace/rank-*.jsonl: on tp groups, all_reduce records in phases forward and backward with a "
            "`micro_batch` field; on pp groups, send/recv pairs that carry micro-batches 0..3 in both directions.",
            "parallel/timeline/rank-*.jsonl: forward/backward intervals per micro-batch and `recv` waits; the idle "
            "time at the start of stage 1 and at the end of stage 0 is the pipeline bubble.",
            "parallel/ledger.json: each rank's `param` bytes are about a quarter of the model's (half the layers, half "
            "of each matrix); predicted equals measured to the byte.",
            "fault/ and the first-divergence line: the last stage pairs micro-batches 0 and 1 with each other's "
            "targets at step 2. Every message flows as planned, so the trace is clean; the checksum view sees step "
            "2's loss differ."},
       .cannot_extrapolate =
           {"Sequence, context and expert parallelism are not implemented.",
            "The bubble measured on oversubscribed cores mixes the schedule with operating-system contention: read "
            "the order of intervals, not their durations."}},

      {.key = "LSL-F",
       .section = "4.2.3",
       .title = "Hybrid parallelism",
       .mechanism =
           "Hybrid parallelism places strategies on orthogonal axes of one process grid. Here 2 pipeline stages, each "
           "replicated twice with ZeRO-1 over the dp axis, run the interleaved schedule: each rank holds two "
           "non-adjacent chunks of one layer (virtual stages). Full 3D (dp x tp x pp) needs 8 ranks, above the labs' "
           "4-rank limit; LSL-C and LSL-E show the tp pairs.",
       .sets = {"parallel.dp=2", "parallel.pp=2", "parallel.zero=1", "parallel.schedule=interleaved",
                "parallel.virtual_stages=2", "train.steps=6"},
       .world = 4,
       .fault = "stale-grad@2:3",
       .observe =
           {"parallel/topology.json: every rank belongs to one dp group and one pp group; rank 3 is dp1.pp1.",
            "parallel/trace/rank-*.jsonl: pp groups carry send/recv in forward and backward; dp groups carry grad_sync "
            "(ZeRO-1's reduce-scatter as an all_to_all) and, after the optimizer, the all_gather of updated "
            "parameters. The checker proves each group's sequence separately.",
            "parallel/timeline/rank-*.jsonl: the `virtual_stage` field alternates between 0 and 1 within a step.",
            "parallel/checksums.jsonl: bitwise equal to reference/checksums.jsonl (dp, ZeRO-1 and pp are all bitwise "
            "classes).",
            "fault/ and the first-divergence line: rank 3 does not zero its gradient buffers at step 2, so step 1's "
            "gradient leaks into the sum; the checksum view catches it at step 2 on tensors that stage 1 holds."},
       .cannot_extrapolate =
           {"How to map axes onto a real cluster (tp inside a node, pp and dp across nodes) is a bandwidth question "
            "this single-host run cannot answer.",
            "At 4 ranks no run combines all three axes; interactions that need tp and pp and dp at once are not "
            "exercised by this lab."}},

      {.key = "LSL-G",
       .section = "4.2.4",
       .title = "Memory optimization: ZeRO, recomputation, mixed precision",
       .mechanism =
           "ZeRO removes the replication of model states over the dp axis: stage 1 partitions the Adam moments, stage "
           "2 also the gradients, stage 3 also the parameters, which are gathered per unit just before use and "
           "released after. Full recomputation keeps only each block's input in forward and recomputes the block "
           "during backward. Mixed precision, the section's third technique, is not implemented: every tensor is fp32.",
       .sets = {"parallel.dp=4", "parallel.zero=3", "train.recompute=full", "train.steps=6"},
       .world = 4,
       .fault = "zero3-stale-param@2:1",
       .observe =
           {"parallel/ledger.json, per rank: `optim` is 8 bytes per owned element, a quarter of the dp = 1 run's; "
            "`param` holds the owned shards plus one `param.gather.<unit>` at a time; `grad` holds shards plus the "
            "full-size buffers of the unit being reduced.",
            "parallel/ledger.json: `predicted_*` equals `measured_*` for every tensor name: the memory figures are an "
            "exact account, not a profiler estimate (docs/memory.md gives the formulas).",
            "parallel/ledger.json: with recompute = full the `activation` category holds `recompute.*` and slots "
            "without the per-block saved tensors. Compare: `lab run LSL-G --set train.recompute=none` or `--set "
            "parallel.zero=1` and read the same categories.",
            "parallel/trace/rank-*.jsonl: all_gather of parameters in phases forward and backward on the dp group "
            "(ZeRO-3) in addition to grad_sync.",
            "fault/ and the first-divergence line: rank 1 serves its pre-update shard of the first block in step 2's "
            "gathers, so every rank computes with a stale slice; the per-layer activation view sees `block.0`'s output "
            "differ at step 2 (fault/activations/), then the checksums see the loss differ."},
       .cannot_extrapolate =
           {"No mixed precision: the byte counts use 4-byte parameters and gradients, not the 2-byte ones of the ZeRO "
            "paper, and nothing here says anything about fp16/bf16 numerics or loss scaling.",
            "No CPU/NVMe offload and no activation partitioning across tp.",
            "In a 4M-parameter model workspace and activations dominate the peak; at LLM scale model states do, so "
            "the relative savings differ from what this ledger shows."}},

      {.key = "LSL-H",
       .section = "4.3",
       .title = "Distributed training cluster architecture",
       .mechanism =
           "A training cluster is nodes of accelerators with fast links inside a node and a slower network between "
           "nodes; the process grid's axis order decides which ranks share a node. A cluster also loses workers: a "
           "rank that dies must end the job visibly, and the run must resume from a checkpoint.",
       .sets = {"parallel.dp=2", "parallel.tp=2", "train.steps=6"},
       .world = 4,
       .fault = "rank-crash@2:3",
       .observe =
           {"parallel/topology.json: host, pid and CPU affinity of every rank and the axis order: tp-dp-pp makes tp "
            "fastest-varying, so tp peers are consecutive ranks, the ones a launcher places on one node.",
            "parallel/comm_predicted.json: bytes per group and step; tp traffic grows with batch x sequence x layers, "
            "dp traffic with the parameters each rank holds.",
            "prove.json and logs/fault.log: rank 3 is killed in the middle of step 2; the job view reports a non-zero "
            "exit naming the rank; in fault/trace/, its trace file ends in a valid prefix, and the other ranks' last "
            "records show the collective they were waiting in.",
            "recovery/: the run resumes from parallel/'s step-3 checkpoint and reproduces the reference trajectory."},
       .cannot_extrapolate =
           {"All ranks run on one host: there is no node boundary, switch or rack topology, so placement here only "
            "records what a launcher would need.",
            "Real clusters also fail partially (slow nodes, flapping links, silent data corruption in transit); a "
            "SIGKILL on one machine shows only the clean case."}},

      {.key = "LSL-I",
       .section = "4.3.1",
       .title = "Cluster hardware",
       .mechanism =
           "The section is about the hardware that bounds distributed training: accelerators and their memory, "
           "NVLink/NVSwitch and PCIe inside a node, InfiniBand or RoCE between nodes.",
       .available = false,
       .unavailable_reason =
           "shardproof runs its ranks as CPU processes on one machine that talk over shared memory; it has no "
           "accelerator backend and cannot measure or emulate any of these links. Any bandwidth or latency it printed "
           "would describe this host, not cluster hardware. The analytic planner for cluster-scale estimates "
           "(src/plan/, `shardproof plan`, docs/plan.md) already shows which link each axis of a strategy crosses on "
           "a described cluster; the lab comes with its memory, bytes and step-time report (issue 15, phase 2).",
       .closest = {"LSL-H", "LSL-K"}},

      {.key = "LSL-J",
       .section = "4.3.2",
       .title = "Parameter server architecture",
       .mechanism =
           "In a parameter-server design, workers push gradients to server processes that own the parameters and pull "
           "fresh parameters back, possibly asynchronously with bounded staleness.",
       .available = false,
       .unavailable_reason =
           "shardproof has no parameter-server mode: no server and worker roles, no push/pull, no asynchronous or "
           "stale updates. Every strategy here is decentralized and synchronous. Imitating a server with collectives "
           "would show neither the traffic concentration on the servers nor staleness, so the lab does not pretend. "
           "Contrast with LSL-K: with one server, n workers each push a full gradient and pull the full parameters, so "
           "the server receives n times the model per step; in LSL-K's all-reduce every rank sends and receives the "
           "same 2(n-1)/n of it, as trace/ shows.",
       .closest = {"LSL-K"}},

      {.key = "LSL-K",
       .section = "4.3.3",
       .title = "Decentralized architecture: collective communication",
       .mechanism =
           "Without a server, peers reach the same sum through collectives in which every rank plays the same role. "
           "The deterministic all-reduce is a reduce-scatter (all_to_all) plus an all_gather: each rank sends (n-1)/n "
           "of the gradient in each, the bandwidth-optimal amount a ring achieves, and owns the canonical sum of one "
           "chunk. Every peer must issue the same sequence of collectives: one extra call on one rank breaks the "
           "group.",
       .sets = {"parallel.dp=4", "train.steps=6"},
       .world = 4,
       .fault = "desync-extra-collective@2:2",
       .observe =
           {"parallel/trace/rank-0000[0-3].jsonl: the same `seq`, `op` and counts on every member of dp[tp0.pp0], and "
            "the same bytes per rank: no rank is a hot spot.",
            "parallel/trace/rank-00000.jsonl: with n = 4 an all_to_all sends 3/4 of a unit's gradient and the "
            "all_gather another 3/4; compare with parallel/comm_predicted.json.",
            "fault/trace/ and the first-divergence line: rank 2 issues one extra all_reduce on the world group at step "
            "2; the trace-consistency checker names the group, the sequence number, the ranks and the field that "
            "differ.",
            "`shardproof trace check DIR/fault` re-runs that checker on the fault run's traces alone."},
       .cannot_extrapolate =
           {"Collective algorithms differ by library and topology (ring, tree, hierarchical, in-network); this lab "
            "shows the amounts a rank sends, not the time any algorithm takes on real links.",
            "In a real job an unmatched collective often hangs or corrupts silently; here the watchdog and the trace "
            "checker turn it into a named error."}},

      {.key = "LSL-L",
       .section = "4.4",
       .title = "DeepSpeed practice",
       .mechanism =
           "DeepSpeed wraps an ordinary training loop in an engine that owns the partitioned optimizer, the gradient "
           "synchronisation and the checkpoints, all driven by one configuration file. shardproof's counterparts: one "
           "preset plus --set overrides, frozen and hashed into contract.json, and partitioned checkpoints (one shard "
           "per rank and a manifest) that resume exactly.",
       .sets = {"parallel.dp=2", "parallel.zero=1", "train.steps=8"},
       .world = 2,
       .fault = "ckpt-missing-shard@3:1",
       .observe =
           {"contract.json: the whole run definition (config, data hashes, versions) and its hash; later stages refuse "
            "a different contract naming the field, the role a config file and launch script play, made checkable.",
            "parallel/checkpoints/step-*/manifest.json: one shard per rank with size and SHA-256, the topology, the "
            "optimizer step and the data cursor.",
            "fault/checkpoints/: rank 1's shard of the checkpoint saved after step 3 is deleted; the checkpoint view "
            "refuses it naming the missing file.",
            "recovery/checksums.jsonl: resumed from parallel/'s intact step-4 checkpoint, equal to the reference's."},
       .cannot_extrapolate =
           {"This is not DeepSpeed: no ds_config.json, no deepspeed launcher, no fp16 optimizer, no offload; the lab "
            "shows the ideas on this engine.",
            "Checkpoints go to a local file system; parallel file systems and object stores fail differently "
            "(partial visibility, eventual consistency)."}},

      {.key = "LSL-M",
       .section = "4.4.1",
       .title = "DeepSpeed concepts: ZeRO stages and configuration",
       .mechanism =
           "The configuration concepts: the ZeRO stage says what is partitioned over dp, and the batch relation global "
           "batch = micro-batch x accumulation steps x dp fixes what one step means. Here ZeRO-2 on 2 ranks, "
           "micro-batch 2, 2 accumulated micro-batches per rank, global batch 8. A step whose gradients are not finite "
           "is not applied on any rank.",
       .sets = {"parallel.dp=2", "parallel.zero=2", "train.steps=6"},
       .world = 2,
       .fault = "nan-injection@2:1",
       .observe =
           {"contract.json, its config: DeepSpeed's train_micro_batch_size_per_gpu is train.micro_batch_size (2), "
            "gradient_accumulation_steps is micro-batches per dp rank (8 / 2 / 2 = 2), train_batch_size is "
            "train.global_batch (8), zero_optimization.stage is parallel.zero (2).",
            "parallel/ledger.json: the `grad.<unit>.shard` buffers live for the whole run while the full-size "
            "`grad.<unit>.b<i>` buffers are freed after each unit's sync (ZeRO-2); `optim` is half of dp = 1's.",
            "parallel/trace/rank-*.jsonl: grad_sync is a reduce-scatter (all_to_all) only; the updated parameter "
            "shards are all_gathered after the optimizer.",
            "fault/checksums.jsonl: a NaN enters rank 1's first micro-batch gradient at step 2; its grad records show "
            "`finite: false` with a `nonfinite` count, no rank applies that update, and the run stops there "
            "(evidence.stop_on_divergence)."},
       .cannot_extrapolate =
           {"No dynamic loss scaling exists here: the NaN is injected, not an fp16 overflow, so nothing follows about "
            "how often overflow happens or how a scaler backs off.",
            "ZeRO-Offload, ZeRO-Infinity, ZeRO++ and quantized collectives are not implemented."}},

      {.key = "LSL-N",
       .section = "4.4.2",
       .title = "LLaMA distributed training practice",
       .mechanism =
           "The model trained by every lab is LLaMA-shaped: RMSNorm, rotary position embeddings, grouped-query "
           "attention (8 query heads share 4 key/value heads), SwiGLU MLP, no biases, Hugging Face tensor names. The "
           "practice is the whole pipeline around it: a prepared corpus and tokenizer, a held-out split, "
           "tensor-parallel training with ZeRO-1 over dp, checkpoints, evaluation, export.",
       .sets = {"parallel.dp=2", "parallel.tp=2", "parallel.zero=1", "train.steps=8",
                "evidence.activation_digests=true"},
       .world = 4,
       .fault = "ckpt-truncate@3:2",
       .observe =
           {"contract.json: the corpus, tokenizer, split and shard hashes the run is bound to.",
            "parallel/checksums.jsonl: Hugging Face names (model.layers.{i}.self_attn.q_proj.weight, ...); with tp = 2 "
            "each rank computes 4 query heads and 2 key/value heads, so every GQA group stays on one rank.",
            "parallel/metrics.jsonl: `eval_loss` before training (step -1) and after the last step on the held-out "
            "split.",
            "evidence.activation_digests = true requests per-layer activation digests (embedding, each block, final "
            "norm, logits), the view that localizes a forward-path fault to a layer; a build that does not write them "
            "yet reports that view as not recorded.",
            "fault/checkpoints/: rank 2's shard of the checkpoint saved after step 3 loses its last byte; the "
            "checkpoint view reports the size mismatch naming the file.",
            "`shardproof ckpt export DIR/recovery --out hf/model.safetensors` writes the recovered model with Hugging "
            "Face names, plus config.json."},
       .cannot_extrapolate =
           {"Real LLaMA training means billions of parameters, trillions of tokens, bf16, long contexts and fused "
            "attention kernels; this is the same architecture at 4M parameters on a small bundled corpus.",
            "An eval loss after 8 steps shows that learning started and matches the reference; it says nothing about "
            "model quality."}},

      {.key = "LSL-O",
       .section = "4.5",
       .title = "Reflections",
       .mechanism =
           "What evidence can and cannot establish about a distributed run. Equivalence to one device, an exact memory "
           "account and consistent communication are checkable from files; speed, convergence at scale and hardware "
           "behaviour are not, on this machine. This smallest complete proof uses a storage fault to make a second "
           "point: correctness includes what is written to disk.",
       .sets = {"parallel.dp=2", "train.steps=8"},
       .world = 2,
       .fault = "ckpt-bitflip@3:0",
       .observe =
           {"summary.md: which criteria are required and which are information only (throughput).",
            "gate.json: every criterion's evidence pointer. `shardproof verify DIR` derives the verdict from the files "
            "alone; copy the bundle, edit one line of parallel/checksums.jsonl and verify the copy: it fails naming "
            "the file.",
            "fault/checkpoints/: one flipped bit in rank 0's checkpoint shard; loss and gradients are untouched, only "
            "the SHA-256 in the manifest catches it.",
            "a variation to try: --set parallel.reduction=fast uses MPI's own reductions, whose order the library "
            "chooses; gradients are then equal only within a tolerance (docs/equivalence.md)."},
       .cannot_extrapolate = {"Everything listed under every lab's common limits applies here; this lab is the "
                              "place to read them together."}},
  };
  return k;
}

const std::vector<std::string>& lab_common_limits() {
  static const std::vector<std::string> k = {
      "Ranks are CPU processes on one host talking over shared memory: no time, bandwidth or latency here says "
      "anything about NVLink, PCIe, InfiniBand or RoCE.",
      "The model is the tiny preset (about 4M parameters, 4 layers, 128-token sequences); the proportions between "
      "memory categories and between compute and communication change at billions of parameters.",
      "fp32 only: no fp16/bf16, no loss scaling; the bitwise claims are about fp32 with the canonical reduction order.",
      "6-8 optimizer steps: the evaluation shows that the run learns and matches the reference, not that a "
      "configuration converges to a good model.",
      "Up to 4 ranks on 2 shared cores: tokens/s and step times are reported and mean nothing about scaling.",
  };
  return k;
}

std::string_view lab_evaluation() {
  return "the gate's held-out criterion: the parallel run's eval loss on the decontaminated held-out split (never "
         "trained on) must drop below the initial model's by prove.eval_margin (0.5 nats unless the config says "
         "otherwise) and equal the single-device reference's; it is a forward-only pass, separate from the training "
         "loss (parallel/metrics.jsonl, `eval_loss` at step -1 and after the last step).";
}

Result<const Lab*> find_lab(std::string_view key) {
  std::string k;
  for (char c : key) k += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (k.size() == 1) k = "LSL-" + k;
  std::string keys;
  for (const Lab& lab : lab_catalogue()) {
    if (lab.key == k) return &lab;
    keys += (keys.empty() ? "" : ", ") + lab.key;
  }
  return not_found("no lab '{}'", key).with_hint("the labs are " + keys + " (`shardproof lab list`)");
}

Result<parallel::RunConfig> lab_config(const Lab& lab, const std::string& root,
                                       const std::vector<std::string>& extra_sets) {
  std::vector<std::string> sets = lab.sets;
  sets.insert(sets.end(), extra_sets.begin(), extra_sets.end());
  Result<parallel::RunConfig> config = load_run_config(root, lab.preset, "", sets);
  if (!config.ok()) return config.status().with_context(fmt::format("lab {}", lab.key));
  return config;
}

Status validate_lab(const Lab& lab, const std::string& root, const std::vector<std::string>& extra_sets) {
  if (!lab.available)
    return failed_precondition("lab {} (§{} {}) is not available: {}", lab.key, lab.section, lab.title,
                               lab.unavailable_reason);
  SP_ASSIGN_OR_RETURN(const parallel::RunConfig config, lab_config(lab, root, extra_sets));
  const auto context = [&](const Status& s) { return s.with_context(fmt::format("lab {}", lab.key)); };
  // The declared world is the catalogue's promise; a learner's --set may change the topology.
  const int world = extra_sets.empty() ? lab.world : config.parallel.world();
  Result<parallel::Plan> plan = parallel::Plan::make(config, world);
  if (!plan.ok()) return context(plan.status());
  Result<evidence::FaultSpec> fault = evidence::parse_fault(lab.fault);
  if (!fault.ok()) return context(fault.status());
  if (!fault->any()) return invalid_argument("lab {}: no fault; stage 3 needs one from the catalogue", lab.key);
  // As `prove` plans stage 3 (proof/protocol.h).
  if (Result<proof::ProtocolPlan> p = proof::plan_protocol(config, lab.fault); !p.ok()) return context(p.status());
  return Status();
}

ProveOptions lab_prove_options(const Lab& lab, const LabRunOptions& options) {
  ProveOptions p;
  p.preset = lab.preset;
  p.sets = lab.sets;
  p.sets.insert(p.sets.end(), options.extra_sets.begin(), options.extra_sets.end());
  p.fault = lab.fault;
  p.out = options.out;
  p.root = options.root;
  p.cache = options.cache;
  p.title = fmt::format("{} §{} {}", lab.key, lab.section, lab.title);
  p.quiet = options.quiet;
  return p;
}

namespace {

// Display width in columns: UTF-8 code points (the catalogue's text is Latin plus §, ≥, ×).
size_t columns(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Wraps `text` at `width` columns; the first line starts with `first`, later lines with `rest`.
std::string wrap(std::string_view text, const std::string& first, const std::string& rest, size_t width = 100) {
  std::string out = first;
  size_t col = columns(first);
  bool line_empty = true;
  size_t i = 0;
  while (i < text.size()) {
    const size_t j = std::min(text.find(' ', i), text.size());
    const std::string_view word = text.substr(i, j - i);
    i = j + 1;
    if (word.empty()) continue;
    if (!line_empty && col + 1 + columns(word) > width) {
      out += "\n" + rest;
      col = columns(rest);
      line_empty = true;
    }
    if (!line_empty) {
      out += ' ';
      ++col;
    }
    out += word;
    col += columns(word);
    line_empty = false;
  }
  return out + "\n";
}

std::string command_of(const Lab& lab) {
  std::string low = lab.key;
  for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return fmt::format("shardproof lab run {} --out runs/{}", lab.key, low);
}

std::string prove_equivalent(const Lab& lab) {
  std::string s = "shardproof prove --preset " + lab.preset;
  for (const std::string& set : lab.sets) s += " --set " + set;
  return s + " --fault " + lab.fault + " --out DIR";
}

}  // namespace

std::string lab_list_text() {
  std::string out = fmt::format("{:<6} {:<6} {:>5}  {:<28} {}\n", "key", "§", "ranks", "fault", "title");
  for (const Lab& lab : lab_catalogue()) {
    const std::string ranks = lab.available ? std::to_string(lab.world) : "-";
    const std::string fault = lab.available ? lab.fault : "(unavailable)";
    out += fmt::format("{:<6} {:<6} {:>5}  {:<28} {}\n", lab.key, lab.section, ranks, fault, lab.title);
  }
  out +=
      "\nshardproof lab show KEY   what a lab runs, what to observe, what it cannot be extrapolated to\nshardproof lab "
      "run KEY --out DIR   run it (the proof protocol, docs/labs.md)\n";
  return out;
}

namespace {

// The reason and the closest runnable labs of an unavailable lab.
std::string unavailable_body(const Lab& lab) {
  std::string out = wrap(lab.unavailable_reason, "  why: ", "       ");
  for (const std::string& key : lab.closest) {
    Result<const Lab*> c = find_lab(key);
    out += fmt::format("  closest runnable demonstration: {} §{} {}\n    shardproof lab run {} --out DIR\n", key,
                       c.ok() ? (*c)->section : "?", c.ok() ? (*c)->title : "?", key);
  }
  return out;
}

}  // namespace

std::string lab_unavailable_text(const Lab& lab) {
  return fmt::format("{} §{} {}: not available in shardproof\n", lab.key, lab.section, lab.title) +
         unavailable_body(lab);
}

std::string lab_show_text(const Lab& lab) {
  std::string out = fmt::format("{}  §{} {}\n\n", lab.key, lab.section, lab.title);
  out += wrap(lab.mechanism, "", "");
  if (!lab.available) return out + "\nnot available in shardproof:\n" + unavailable_body(lab);
  out += "\nrun:\n";
  out += fmt::format("  ranks: {}   preset: {}   overrides: ", lab.world, lab.preset);
  for (size_t i = 0; i < lab.sets.size(); ++i) out += (i ? " " : "") + lab.sets[i];
  out += "\n";
  Result<evidence::FaultSpec> f = evidence::parse_fault(lab.fault);
  if (f.ok()) {
    const evidence::FaultInfo& info = evidence::fault_info(f->kind);
    out += wrap(fmt::format("{}: {}; expected first detector: {} ({})", lab.fault, info.breaks,
                            evidence::view_name(info.expected_view), info.expectation),
                "  fault: ", "    ");
  } else {
    out += "  fault: " + lab.fault + " (does not parse: " + f.status().message() + ")\n";
  }
  out += wrap(lab_evaluation(), "  independent evaluation: ", "    ");
  out += "  command: " + command_of(lab) + "\n";
  out += wrap(prove_equivalent(lab), "  (the same as: ", "    ");
  out.back() = ')';
  out += "\n\nwhat to observe:\n";
  for (const std::string& line : lab.observe) out += wrap(line, "  - ", "    ");
  out += "\nwhat it cannot be extrapolated to:\n";
  for (const std::string& line : lab.cannot_extrapolate) out += wrap(line, "  - ", "    ");
  for (const std::string& line : lab_common_limits()) out += wrap(line, "  - ", "    ");
  return out;
}

}  // namespace sp::cli
