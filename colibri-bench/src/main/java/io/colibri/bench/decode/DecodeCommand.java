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
@Command(name = "decode", mixinStandardHelpOptions = true,
    versionProvider = Commands.VersionProvider.class,
    header = "Runs a tensor-parallel Llama-shaped decoder on Colibri (float32, CPU or GPU).",
    sortOptions = false,
    description = {
        "Greedy decoding with a Llama-shaped model whose weights come from a seed (nothing to"
            + " download): column-parallel Q/K/V and gate/up, row-parallel O and down each followed"
            + " by an all-reduce, a vocabulary-parallel head followed by an all-gather. The ranks"
            + " are threads of this JVM, each with its own communicator; the model runs in float32 on"
            + " the CPU over host memory (the reference) or on GPUs (docs/end-to-end.md).",
        ""},
    footer = {"",
        "Example:",
        "  java -jar colibri-bench.jar decode --tp 4 --check",
        "Exit code: 0 ok, 1 --check failed, 2 bad command line, 3 a rank failed."})
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

  @Spec
  private CommandSpec spec;

  @Option(names = "--tp", paramLabel = "N", description = "Ranks of the group (default: ${DEFAULT-VALUE}).")
  int tp = 2;

  @Option(names = "--model", paramLabel = "SHAPE",
      description = "small (hidden 256, 16 heads, 8 KV heads, intermediate 512, vocab 1024, batch 4,"
          + " context 64) or llama8b (hidden 4096, 32 heads, 8 KV heads, intermediate 14336,"
          + " vocab 32000, batch 16, context 256; slow on a CPU). Default: ${DEFAULT-VALUE}.")
  String model = "small";

  @Option(names = "--layers", paramLabel = "L", description = "Layers (default: 2).")
  Integer layers;

  @Option(names = "--batch", paramLabel = "B", description = "Sequences decoded together (default: the model's).")
  Integer batch;

  @Option(names = "--prompt", paramLabel = "P", description = "Prompt tokens per sequence (default: ${DEFAULT-VALUE}).")
  int prompt = 8;

  @Option(names = "--new", paramLabel = "N", description = "Tokens generated per sequence (default: ${DEFAULT-VALUE}).")
  int newTokens = 16;

  @Option(names = "--check", description = "Run TP=1 first; TP=N's tokens must be identical, its logits within --tolerance.")
  boolean check;

  @Option(names = "--tolerance", paramLabel = "T",
      description = "--check: the largest logit difference allowed (default: ${DEFAULT-VALUE}).")
  double tolerance = 1e-4;

  @Option(names = "--transport", paramLabel = "T",
      description = "Colibri's transport between the rank threads: auto, shm, socket (default: ${DEFAULT-VALUE}).")
  String transport = "auto";

  @Option(names = "--device", paramLabel = "D",
      description = "cpu (float32 on the CPU, host buffers) or gpu (float32 on GPUs: cuBLAS, the"
          + " decoder's kernels, Colibri's device collectives). Default: ${DEFAULT-VALUE}.")
  String device = "cpu";

  @Option(names = "--graph", description = "gpu: capture the decode step once in a CUDA graph and replay it.")
  boolean graph;

  @Option(names = "--library", paramLabel = "L",
      description = "gpu: the collectives' library, colibri or nccl (the system's libnccl.so.2:"
          + " one rank per GPU). Default: ${DEFAULT-VALUE}.")
  String library = "colibri";

  @Option(names = "--spread", description = "gpu: rank r on GPU r %% (GPUs seen); default: every rank on GPU 0.")
  boolean spread;

  @Option(names = "--processes",
      description = "Each rank a JVM of its own (started here, same Java and class path); default: threads of this JVM.")
  private boolean processes;

  @Option(names = "--csv", paramLabel = "FILE",
      description = "Also append each printed row to FILE as CSV (the header first when FILE is new or empty).")
  private Path csv;

  @Option(names = "--seed", paramLabel = "S", description = "The model's and the prompt's seed (default: ${DEFAULT-VALUE}).")
  long seed = 1234;

  @Option(names = "--timeout", paramLabel = "SECONDS",
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
    ModelShape base = switch (model) {
      case "small" -> SMALL;
      case "llama8b" -> ModelShape.llama8b(2);
      default -> throw new ParameterException(spec.commandLine(),
          "--model " + model + ": use small or llama8b");
    };
    return new ModelShape(base.hidden(), base.heads(), base.kvHeads(), base.intermediate(),
        layers != null ? layers : base.layers(), base.vocab(), batch != null ? batch : base.batch(),
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
      throw new ParameterException(spec.commandLine(), "--prompt " + prompt + " and --new " + newTokens
          + ": each must be 1 or more, and together at most the context of " + s.context());
    }
    Transport t = switch (transport.toLowerCase(Locale.ROOT)) {
      case "auto" -> Transport.AUTO;
      case "shm" -> Transport.SHM;
      case "socket" -> Transport.SOCKET;
      default -> throw new ParameterException(spec.commandLine(),
          "--transport " + transport + ": use auto, shm or socket");
    };
    boolean gpu = switch (device) {
      case "cpu" -> false;
      case "gpu" -> true;
      default -> throw new ParameterException(spec.commandLine(), "--device " + device + ": use cpu or gpu");
    };
    if (!gpu && (graph || spread || !library.equals("colibri"))) {
      throw new ParameterException(spec.commandLine(),
          (graph ? "--graph" : spread ? "--spread" : "--library " + library) + " needs --device gpu");
    }
    if (!library.equals("colibri") && !library.equals("nccl")) {
      throw new ParameterException(spec.commandLine(), "--library " + library + ": use colibri or nccl");
    }
    if (processes && library.equals("nccl")) {
      throw new ParameterException(spec.commandLine(),
          "--processes runs Colibri's collectives only so far: leave out --library nccl, or run the ranks as threads");
    }
    int gpus = 0;
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
    }
    Options options = Options.builder().transport(t).timeout(Duration.ofSeconds(timeoutSeconds)).build();
    out.printf(Locale.ROOT, "# decode: hidden %d, %d heads, %d KV heads, intermediate %d, %d layers,"
        + " vocab %d, batch %d, context %d; prompt %d, new %d; float32 %s, ranks as %s%n",
        s.hidden(), s.heads(), s.kvHeads(), s.intermediate(), s.layers(), s.vocab(), s.batch(),
        s.context(), prompt, newTokens, !gpu ? "on the CPU"
            : (graph ? "on the GPU, the step replayed as one CUDA graph" : "on the GPU, eager")
                + (spread ? ", rank r on GPU r % " + gpus : ", every rank on GPU 0"),
        processes ? "processes" : "threads");
    if (gpu) {
      out.println("# collectives: " + (library.equals("nccl") ? "NCCL (the system's libnccl.so.2)" : "Colibri")
          + "; GPU memory in use (cudaMemGetInfo, rank 0's GPU) grew by init+ at the library's init,"
          + " model at the weights and buffers, run+ over the generation; own: the library's own count");
    }
    out.printf(Locale.ROOT, "# %4s %12s %12s %14s %10s %10s %10s %10s %10s%n", "tp", "ms/step", "tokens/s",
        "first step ms", "init ms", "init+ MiB", "model MiB", "run+ MiB", "own MiB");
    try {
      LocalGroup.Result ref = null;
      if (check) {
        ref = group(s, 1, options, gpu, gpus, true, Function.identity());
        print(ref);
        writeCsv(s, gpu, ref, "reference");
      }
      LocalGroup.Result r = group(s, tp, options, gpu, gpus, check, wrap);
      print(r);
      out.println("tokens (sequence 0): " + Arrays.toString(column(r.rank0().tokens(), 0)));
      if (check) {
        boolean same = Arrays.deepEquals(ref.rank0().tokens(), r.rank0().tokens());
        double diff = same ? LocalGroup.compare(ref.rank0(), r.rank0()) : Double.NaN;
        if (!same || diff > tolerance) {
          writeCsv(s, gpu, r, "fail");
          out.printf(Locale.ROOT, "FAIL: TP=%d against TP=1: tokens %s, largest logit difference %.3g"
              + " (tolerance %.3g)%n", tp, same ? "identical" : "differ", diff, tolerance);
          return EXIT_CHECK;
        }
        writeCsv(s, gpu, r, "ok");
        out.printf(Locale.ROOT, "ok: TP=%d equals TP=1 (tokens identical, logits within %.3g)%n", tp, diff);
      } else {
        writeCsv(s, gpu, r, "");
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

  private LocalGroup.Result group(ModelShape s, int n, Options options, boolean gpu, int gpus,
      boolean keep, Function<TpCollectives, TpCollectives> w) {
    if (processes) {
      return ProcessGroup.run(new ProcessGroup.Spec(s, n, options.transport(), options.timeout(), gpu, graph,
          spread, gpus, seed, prompt, newTokens, keep, -1));
    }
    if (!gpu) {
      return LocalGroup.run(s, n, options, seed, prompt, newTokens, keep, w);
    }
    return DeviceGroup.run(s, n, options, library.equals("nccl"), spread, gpus, seed, prompt, newTokens,
        keep, graph);
  }

  private void print(LocalGroup.Result r) {
    Generation g = r.rank0();
    double ms = g.medianStepNanos() / 1e6;
    LocalGroup.Memory m = r.ranks().get(0).memory();
    String mem = m == null ? String.format(Locale.ROOT, " %10s %10s %10s %10s", "-", "-", "-", "-")
        : String.format(Locale.ROOT, " %10.1f %10.1f %10.1f %10s", mib(m.afterInit() - m.beforeInit()),
            mib(m.afterModel() - m.afterInit()), mib(m.afterGeneration() - m.afterModel()),
            m.libraryOwn() < 0 ? "-" : String.format(Locale.ROOT, "%.1f", mib(m.libraryOwn())));
    out.printf(Locale.ROOT, "  %4d %12.3f %12.1f %14.3f %10.3f%s%n", r.tp(), ms,
        g.tokens()[0].length / ms * 1000, g.firstStepNanos() / 1e6, r.initNanos() / 1e6, mem);
  }

  /** The CSV's columns, in order (docs/end-to-end.md). */
  static final String CSV_HEADER = "library,device,mode,hidden,layers,vocab,batch,tp,ms_per_step,tokens_per_s,"
      + "first_step_ms,init_ms,init_mib,model_mib,run_mib,own_mib,check";

  /**
   * Appends one row to --csv (if given): the printed row's figures; the memory columns empty on
   * the CPU, own_mib empty where the library counts none; check is "reference" (TP=1 of
   * --check), "ok", "fail" or empty.
   */
  private void writeCsv(ModelShape s, boolean gpu, LocalGroup.Result r, String checked) throws IOException {
    if (csv == null) {
      return;
    }
    Generation g = r.rank0();
    double ms = g.medianStepNanos() / 1e6;
    LocalGroup.Memory m = r.ranks().get(0).memory();
    String mem = m == null ? ",,,"
        : String.format(Locale.ROOT, "%.1f,%.1f,%.1f,%s", mib(m.afterInit() - m.beforeInit()),
            mib(m.afterModel() - m.afterInit()), mib(m.afterGeneration() - m.afterModel()),
            m.libraryOwn() < 0 ? "" : String.format(Locale.ROOT, "%.1f", mib(m.libraryOwn())));
    String row = String.format(Locale.ROOT, "%s,%s,%s,%d,%d,%d,%d,%d,%.4f,%.1f,%.3f,%.3f,%s,%s%n",
        gpu ? library : "colibri", gpu ? "gpu" : "cpu", !gpu ? "host" : graph ? "graph" : "eager", s.hidden(),
        s.layers(), s.vocab(), s.batch(), r.tp(), ms, g.tokens()[0].length / ms * 1000,
        g.firstStepNanos() / 1e6, r.initNanos() / 1e6, mem, checked);
    boolean fresh = !Files.exists(csv) || Files.size(csv) == 0;
    Files.writeString(csv, (fresh ? CSV_HEADER + System.lineSeparator() : "") + row, StandardCharsets.UTF_8,
        StandardOpenOption.CREATE, StandardOpenOption.APPEND);
  }

  private static double mib(long bytes) {
    return bytes / (1024.0 * 1024.0);
  }

  private static int[] column(int[][] t, int col) {
    int[] c = new int[t.length];
    for (int i = 0; i < t.length; i++) {
      c[i] = t[i][col];
    }
    return c;
  }
}
