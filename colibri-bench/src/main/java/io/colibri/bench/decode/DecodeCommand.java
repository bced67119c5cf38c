/*
 * Copyright 2026 The Colibri Authors. Licensed under the Apache License, Version 2.0.
 */
package io.colibri.bench.decode;

import io.colibri.Options;
import io.colibri.Transport;
import io.colibri.bench.common.Commands;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.function.Function;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * The {@code decode} command: a tensor-parallel Llama-shaped decoder on Colibri, ranks as threads
 * of this JVM, in float32 on the CPU ({@link HostDecoder}, the reference) or on GPUs
 * ({@link DeviceDecoder}). Prints
 * the generation's figures per TP size; {@code --check} runs TP=1 first and requires TP=N's tokens
 * to be identical and its logits within {@code --tolerance}.
 */
@Command(
    name = "decode",
    mixinStandardHelpOptions = true,
    versionProvider = Commands.VersionProvider.class,
    header =
        "Runs a tensor-parallel Llama-shaped decoder on Colibri (CPU: float32; GPU: float32 or"
            + " bfloat16).",
    sortOptions = false,
    description = {
      "Greedy decoding with a Llama-shaped model whose weights come from a seed (nothing to"
          + " download): column-parallel Q/K/V and gate/up, row-parallel O and down each followed"
          + " by an all-reduce, a vocabulary-parallel head followed by an all-gather. The ranks are"
          + " threads of this JVM (or processes), each with its own communicator; the model runs in"
          + " float32 on the CPU over host memory (the reference) or on GPUs (docs/end-to-end.md).",
      ""
    },
    footer = {
      "",
      "Example:",
      "  java -jar colibri-bench.jar decode --tp 4 --check",
      "Exit code: 0 ok, 1 --check failed, 2 bad command line, 3 a rank failed or --csv could not be"
          + " written."
    })
public final class DecodeCommand implements Callable<Integer> {

  static final int EXIT_OK = 0;
  static final int EXIT_CHECK = 1;
  static final int EXIT_USAGE = Commands.EXIT_USAGE;
  static final int EXIT_FAILED = Commands.EXIT_FAILED;

  /** A small model whose every size splits over 1, 2, 4 and 8 ranks; a step takes milliseconds on a CPU. */
  static final ModelShape SMALL = new ModelShape(256, 16, 8, 512, 2, 1024, 4, 64);

  private final PrintStream out;
  private final PrintStream err;
  private Function<TpCollectives, TpCollectives> wrap = Function.identity();

  @Spec private CommandSpec spec;

  @Option(
      names = "--tp",
      paramLabel = "N",
      description = "Ranks of the group (default: ${DEFAULT-VALUE}).")
  int tp = 2;

  @Option(
      names = "--model",
      paramLabel = "SHAPE",
      description =
          "small (hidden 256, 16 heads, 8 KV heads, intermediate 512, vocab 1024, batch 4,"
              + " context 64) or llama8b (hidden 4096, 32 heads, 8 KV heads, intermediate 14336,"
              + " vocab 32000, batch 16, context 256; slow on a CPU). Default: ${DEFAULT-VALUE}.")
  String model = "small";

  @Option(names = "--layers", paramLabel = "L", description = "Layers (default: 2).")
  Integer layers;

  @Option(
      names = "--batch",
      paramLabel = "B",
      description = "Sequences decoded together (default: the model's).")
  Integer batch;

  @Option(
      names = "--prompt",
      paramLabel = "P",
      description = "Prompt tokens per sequence (default: ${DEFAULT-VALUE}).")
  int prompt = 8;

  @Option(
      names = "--new",
      paramLabel = "N",
      description = "Tokens generated per sequence (default: ${DEFAULT-VALUE}).")
  int newTokens = 16;

  @Option(
      names = "--check",
      description =
          "Run TP=1 first; TP=N's tokens must be identical, its logits within --tolerance.")
  boolean check;

  @Option(
      names = "--tolerance",
      paramLabel = "T",
      description = "--check: the largest logit difference allowed (default: ${DEFAULT-VALUE}).")
  double tolerance = 1e-4;

  @Option(
      names = "--transport",
      paramLabel = "T",
      description =
          "Colibri's transport between the ranks: auto, shm, socket or verbs (default:"
              + " ${DEFAULT-VALUE}); TLS on the sockets: COLIBRI_TLS and its certificates in the"
              + " environment (docs/configuration.md).")
  String transport = "auto";

  @Option(
      names = "--device",
      paramLabel = "D",
      description =
          "cpu (float32 on the CPU, host buffers) or gpu (on GPUs: cuBLAS, the"
              + " decoder's kernels, Colibri's device collectives). Default: ${DEFAULT-VALUE}.")
  String device = "cpu";

  @Option(
      names = "--dtype",
      paramLabel = "T",
      description =
          "gpu: float32 or bfloat16 (weights, activations, KV cache, collectives). Default:"
              + " ${DEFAULT-VALUE}.")
  String dtype = "float32";

  @Option(
      names = "--graph",
      description = "gpu: capture the decode step once in a CUDA graph and replay it.")
  boolean graph;

  @Option(
      names = "--library",
      paramLabel = "L",
      description =
          "gpu: the collectives' library: colibri, nccl (the system's libnccl.so.2: one rank per"
              + " GPU) or none (no collectives: each rank's compute alone, for the collectives'"
              + " share of a step; wrong tokens above TP=1). Default: ${DEFAULT-VALUE}.")
  String library = "colibri";

  @Option(
      names = "--prefill-chunk",
      paramLabel = "N",
      description =
          "gpu: prompt positions per pass (default: the whole prompt in one pass; 1: one per pass,"
              + " as on the CPU).")
  Integer prefillChunk;

  @Option(
      names = "--budget",
      paramLabel = "GIB",
      description =
          "gpu: the GPU memory budget for the KV-cache column: tokens of cache that what is left"
              + " of it after the run's use holds (default: 80).")
  Double budget;

  /** --budget or its default, as call() found it. */
  private double budgetGib;

  @Option(
      names = "--spread",
      description = "gpu: rank r on GPU r %% (GPUs seen); default: every rank on GPU 0.")
  boolean spread;

  @Option(
      names = "--processes",
      description =
          "Each rank a JVM of its own (started here, same Java and class path); default: threads of"
              + " this JVM.")
  private boolean processes;

  @Option(
      names = "--csv",
      paramLabel = "FILE",
      description =
          "Also append each printed row to FILE as CSV (the header first when FILE is new or"
              + " empty).")
  private Path csv;

  @Option(
      names = "--seed",
      paramLabel = "S",
      description = "The model's and the prompt's seed (default: ${DEFAULT-VALUE}).")
  long seed = 1234;

  @Option(
      names = "--timeout",
      paramLabel = "SECONDS",
      description = "The communicators' timeout (default: ${DEFAULT-VALUE}).")
  int timeoutSeconds = 60;

  /**
   * @param out where the figures go
   * @param err where problems go
   */
  public DecodeCommand(PrintStream out, PrintStream err) {
    this.out = out;
    this.err = err;
  }

  /** Tests put a fault into every rank's collectives through this. */
  DecodeCommand wrapCollectives(Function<TpCollectives, TpCollectives> w) {
    this.wrap = w;
    return this;
  }

  ModelShape shape() {
    ModelShape base =
        switch (model) {
          case "small" -> SMALL;
          case "llama8b" -> ModelShape.llama8b(2);
          default ->
              throw new ParameterException(
                  spec.commandLine(), "--model " + model + ": use small or llama8b");
        };
    return new ModelShape(
        base.hidden(),
        base.heads(),
        base.kvHeads(),
        base.intermediate(),
        layers != null ? layers : base.layers(),
        base.vocab(),
        batch != null ? batch : base.batch(),
        base.context());
  }

  @Override
  public Integer call() {
    ModelShape s = shape();
    List<String> problems = s.problems(tp);
    if (!problems.isEmpty()) {
      throw new ParameterException(spec.commandLine(), String.join("; ", problems));
    }
    if (prompt < 1 || newTokens < 1 || prompt + newTokens > s.context()) {
      throw new ParameterException(
          spec.commandLine(),
          "--prompt "
              + prompt
              + " and --new "
              + newTokens
              + ": each must be 1 or more, and together at most the context of "
              + s.context());
    }
    Transport t =
        switch (transport.toLowerCase(Locale.ROOT)) {
          case "auto" -> Transport.AUTO;
          case "shm" -> Transport.SHM;
          case "socket" -> Transport.SOCKET;
          case "verbs" -> Transport.VERBS;
          default ->
              throw new ParameterException(
                  spec.commandLine(),
                  "--transport " + transport + ": use auto, shm, socket or verbs");
        };
    boolean gpu =
        switch (device) {
          case "cpu" -> false;
          case "gpu" -> true;
          default ->
              throw new ParameterException(
                  spec.commandLine(), "--device " + device + ": use cpu or gpu");
        };
    GpuRun.Library lib;
    Precision precision;
    try {
      lib = GpuRun.Library.parse(library);
      precision = Precision.parse(dtype);
    } catch (IllegalArgumentException e) {
      throw new ParameterException(spec.commandLine(), e.getMessage());
    }
    if (!gpu && (graph || spread || lib != GpuRun.Library.COLIBRI || budget != null)) {
      throw new ParameterException(
          spec.commandLine(),
          (graph
                  ? "--graph"
                  : spread
                      ? "--spread"
                      : lib != GpuRun.Library.COLIBRI ? "--library " + library : "--budget")
              + " needs --device gpu");
    }
    if (!gpu && (precision != Precision.FLOAT32 || prefillChunk != null)) {
      throw new ParameterException(
          spec.commandLine(),
          (prefillChunk != null ? "--prefill-chunk" : "--dtype " + dtype)
              + " needs --device gpu (the CPU decoder is float32 and feeds the prompt one position"
              + " per step)");
    }
    budgetGib = budget != null ? budget : 80;
    if (prefillChunk != null && (prefillChunk < 1 || prefillChunk > prompt)) {
      throw new ParameterException(
          spec.commandLine(),
          "--prefill-chunk " + prefillChunk + ": use 1 to the prompt's " + prompt + " positions");
    }
    if (check && precision != Precision.FLOAT32) {
      throw new ParameterException(
          spec.commandLine(),
          "--check compares TP=N with TP=1 in float32: in "
              + precision.label()
              + " the roundings depend on how the sums are split over the ranks, so the tokens"
              + " may differ; leave out --check or --dtype");
    }
    if (check && lib == GpuRun.Library.NONE) {
      throw new ParameterException(
          spec.commandLine(),
          "--check with --library none: without collectives TP=N computes other tokens; leave out"
              + " one of them");
    }
    if (!(budgetGib > 0) || Double.isInfinite(budgetGib)) {
      throw new ParameterException(
          spec.commandLine(), "--budget " + budgetGib + ": give the GiB of a GPU, above 0");
    }
    int gpus = 0;
    // After every check that needs no GPU: a bad command line says so without loading CUDA.
    if (gpu) {
      try {
        gpus = DeviceDecoder.gpuCount();
      } catch (IllegalStateException e) {
        err.println("colibri decode: " + e.getMessage());
        return EXIT_FAILED;
      }
      if (gpus == 0) {
        err.println("colibri decode: --device gpu: no GPU is visible to this process");
        return EXIT_FAILED;
      }
      int perGpu = spread ? (tp + gpus - 1) / gpus : tp;
      if (lib == GpuRun.Library.NCCL && perGpu > 1) {
        throw new ParameterException(
            spec.commandLine(),
            "--library nccl takes one rank per GPU (NVIDIA's NCCL"
                + " refuses two on one GPU), and --tp "
                + tp
                + (spread ? " over " + gpus + " GPUs" : " without --spread")
                + " puts "
                + perGpu
                + " on GPU 0: "
                + (gpus >= tp ? "add --spread" : "use --tp " + gpus + " or less with --spread"));
      }
    }
    GpuRun gpuRun =
        gpu
            ? new GpuRun(
                lib, precision, graph, spread, gpus, prefillChunk != null ? prefillChunk : prompt)
            : null;
    Options options =
        Options.builder().transport(t).timeout(Duration.ofSeconds(timeoutSeconds)).build();
    out.printf(
        Locale.ROOT,
        "# decode: hidden %d, %d heads, %d KV heads, intermediate %d, %d layers,"
            + " vocab %d, batch %d, context %d; prompt %d, new %d; %s %s, ranks as %s%n",
        s.hidden(),
        s.heads(),
        s.kvHeads(),
        s.intermediate(),
        s.layers(),
        s.vocab(),
        s.batch(),
        s.context(),
        prompt,
        newTokens,
        precision.label(),
        !gpu
            ? "on the CPU, the prompt one position per step"
            : (graph ? "on the GPU, the step replayed as one CUDA graph" : "on the GPU, eager")
                + ", the prompt in passes of "
                + gpuRun.chunk()
                + (spread ? ", rank r on GPU r % " + gpus : ", every rank on GPU 0"),
        processes ? "processes" : "threads");
    if (gpu) {
      out.println(
          "# collectives: "
              + switch (lib) {
                case NCCL -> "NCCL (the system's libnccl.so.2)";
                case COLIBRI -> "Colibri";
                case NONE ->
                    "none (each rank's compute alone; the tokens are not the model's above TP=1)";
              }
              + "; GPU memory in use (cudaMemGetInfo, rank 0's GPU) grew by init+ at the library's"
              + " init, model at the weights and buffers, run+ over the generation; own: the"
              + " library's own count;"
              + String.format(
                  Locale.ROOT,
                  " KV tokens: the KV cache's tokens that %s GiB of rank 0's GPU less all of"
                      + " that holds",
                  budgetGib));
    }
    out.printf(
        Locale.ROOT,
        "# %4s %10s %10s %10s %10s %10s %10s %10s %8s %12s%n",
        "tp",
        "ms/step",
        "tokens/s",
        "TTFT ms",
        "init ms",
        "init+ MiB",
        "model MiB",
        "run+ MiB",
        "own MiB",
        "KV tokens");
    try {
      LocalGroup.Result ref = null;
      if (check) {
        ref = group(s, 1, options, gpuRun, true, Function.identity());
        report(s, gpuRun, ref, "reference");
      }
      LocalGroup.Result r = group(s, tp, options, gpuRun, check, wrap);
      out.println("tokens (sequence 0): " + Arrays.toString(column(r.rank0().tokens(), 0)));
      if (check) {
        boolean same = Arrays.deepEquals(ref.rank0().tokens(), r.rank0().tokens());
        double diff = same ? LocalGroup.compare(ref.rank0(), r.rank0()) : Double.NaN;
        if (!same || !(diff <= tolerance)) {
          report(s, gpuRun, r, "fail");
          out.printf(
              Locale.ROOT,
              "FAIL: TP=%d against TP=1: tokens %s, largest logit difference %.3g"
                  + " (tolerance %.3g)%n",
              tp,
              same ? "identical" : "differ",
              diff,
              tolerance);
          return EXIT_CHECK;
        }
        report(s, gpuRun, r, "ok");
        out.printf(
            Locale.ROOT,
            "ok: TP=%d equals TP=1 (tokens identical, logits within %.3g)%n",
            tp,
            diff);
      } else {
        report(s, gpuRun, r, "");
      }
      return EXIT_OK;
    } catch (IllegalStateException e) {
      err.println("colibri decode: " + e.getMessage());
      return EXIT_FAILED;
    } catch (IOException e) {
      err.println("colibri decode: --csv " + csv + ": " + e.getMessage());
      return EXIT_FAILED;
    }
  }

  private LocalGroup.Result group(
      ModelShape s,
      int n,
      Options options,
      GpuRun gpu,
      boolean keep,
      Function<TpCollectives, TpCollectives> w) {
    if (processes) {
      return ProcessGroup.run(
          new ProcessGroup.Spec(
              s,
              n,
              options.transport(),
              options.timeout(),
              gpu,
              seed,
              prompt,
              newTokens,
              keep,
              -1));
    }
    if (gpu == null) {
      return LocalGroup.run(s, n, options, seed, prompt, newTokens, keep, w);
    }
    return DeviceGroup.run(s, n, options, gpu, seed, prompt, newTokens, keep);
  }

  /** The CSV's columns, in order (docs/end-to-end.md). */
  static final String CSV_HEADER =
      "library,device,dtype,mode,ranks_as,placement,hidden,layers,vocab,batch,prompt,"
          + "prefill_chunk,tp,ms_per_step,tokens_per_s,ttft_ms,init_ms,init_mib,model_mib,run_mib,own_mib,budget_gib,"
          + "kv_tokens,check";

  /**
   * One printed row's figures: what {@link #report} prints and appends to --csv.
   *
   * @param tp the group's size
   * @param msPerStep the median generated step's time
   * @param tokensPerSecond tokens per second over the batch (batch × 1000 / msPerStep)
   * @param ttftMs the time to the first token
   * @param initMs the slowest rank's init
   * @param memory rank 0's GPU memory figures, or null on the CPU
   * @param budgetGib the budget of the KV-cache column
   * @param ranksOnGpu the ranks that share rank 0's GPU (their caches share its memory)
   */
  record Row(
      int tp,
      double msPerStep,
      double tokensPerSecond,
      double ttftMs,
      double initMs,
      LocalGroup.Memory memory,
      double budgetGib,
      int ranksOnGpu) {

    static Row of(LocalGroup.Result r, double budgetGib, GpuRun gpu) {
      Generation g = r.rank0();
      double ms = g.medianStepNanos() / 1e6;
      int onGpu = 0;
      for (int rank = 0; gpu != null && rank < r.tp(); rank++) {
        onGpu += gpu.device(rank) == gpu.device(0) ? 1 : 0;
      }
      return new Row(
          r.tp(),
          ms,
          g.tokens()[0].length * 1000 / ms,
          g.firstTokenNanos() / 1e6,
          r.initNanos() / 1e6,
          r.ranks().get(0).memory(),
          budgetGib,
          Math.max(1, onGpu));
    }

    double initMib() {
      return mib(memory.afterInit() - memory.beforeInit());
    }

    double modelMib() {
      return mib(memory.afterModel() - memory.afterInit());
    }

    double runMib() {
      return mib(memory.afterGeneration() - memory.afterModel());
    }

    /** @return the library's own MiB, or null where it counts none */
    Double ownMib() {
      return memory.libraryOwn() < 0 ? null : mib(memory.libraryOwn());
    }

    /**
     * @return tokens of KV cache that the budget of rank 0's GPU holds once the run's growth
     *     there (libraries, model, lazy allocations) is taken from it, a token taking every
     *     sharing rank's part of it; 0 when nothing is left
     */
    long kvTokens() {
      long used = memory.afterGeneration() - memory.beforeInit();
      long left = (long) (budgetGib * (1L << 30)) - used;
      return left <= 0 ? 0 : left / (memory.kvBytesPerToken() * ranksOnGpu);
    }
  }

  /** Prints the row of {@code r} and appends it to --csv (when given). */
  private void report(ModelShape s, GpuRun gpu, LocalGroup.Result r, String checked)
      throws IOException {
    Row row = Row.of(r, budgetGib, gpu);
    LocalGroup.Memory m = row.memory();
    String mem =
        m == null
            ? String.format(Locale.ROOT, " %10s %10s %10s %8s %12s", "-", "-", "-", "-", "-")
            : String.format(
                Locale.ROOT,
                " %10.1f %10.1f %10.1f %8s %12d",
                row.initMib(),
                row.modelMib(),
                row.runMib(),
                row.ownMib() == null ? "-" : String.format(Locale.ROOT, "%.1f", row.ownMib()),
                row.kvTokens());
    out.printf(
        Locale.ROOT,
        "  %4d %10.3f %10.1f %10.3f %10.3f%s%n",
        row.tp(),
        row.msPerStep(),
        row.tokensPerSecond(),
        row.ttftMs(),
        row.initMs(),
        mem);
    writeCsv(s, gpu, row, checked);
  }

  /**
   * Appends one row to --csv (if given): the printed row's figures; the memory columns empty on
   * the CPU, own_mib empty where the library counts none; check is "reference" (TP=1 of
   * --check), "ok", "fail" or empty.
   */
  private void writeCsv(ModelShape s, GpuRun gpu, Row row, String checked) throws IOException {
    if (csv == null) {
      return;
    }
    LocalGroup.Memory m = row.memory();
    String mem =
        m == null
            ? ",,,,,"
            : String.format(
                Locale.ROOT,
                "%.1f,%.1f,%.1f,%s,%s,%d",
                row.initMib(),
                row.modelMib(),
                row.runMib(),
                row.ownMib() == null ? "" : String.format(Locale.ROOT, "%.1f", row.ownMib()),
                String.format(Locale.ROOT, "%s", row.budgetGib()),
                row.kvTokens());
    String line =
        String.format(
            Locale.ROOT,
            "%s,%s,%s,%s,%s,%s,%d,%d,%d,%d,%d,%d,%d,%.4f,%.1f,%.3f,%.3f,%s,%s%n",
            gpu != null ? gpu.library().label() : "colibri",
            gpu != null ? "gpu" : "cpu",
            gpu != null ? gpu.precision().label() : "float32",
            gpu == null ? "host" : gpu.graph() ? "graph" : "eager",
            processes ? "processes" : "threads",
            gpu != null && gpu.spread() ? "spread" : "one",
            s.hidden(),
            s.layers(),
            s.vocab(),
            s.batch(),
            prompt,
            gpu != null ? gpu.chunk() : 1,
            row.tp(),
            row.msPerStep(),
            row.tokensPerSecond(),
            row.ttftMs(),
            row.initMs(),
            mem,
            checked);
    boolean fresh = !Files.exists(csv) || Files.size(csv) == 0;
    Files.writeString(
        csv,
        (fresh ? CSV_HEADER + System.lineSeparator() : "") + line,
        StandardCharsets.UTF_8,
        StandardOpenOption.CREATE,
        StandardOpenOption.APPEND);
  }

  private static double mib(long bytes) {
    return bytes / (1024.0 * 1024.0);
  }

  static int[] column(int[][] t, int col) {
    int[] c = new int[t.length];
    for (int i = 0; i < t.length; i++) {
      c[i] = t[i][col];
    }
    return c;
  }
}
