import ArgumentParser
import Darkroom
import DarkroomCore
import Foundation

/// `darkroom run PIPELINE INPUT...`: runs a pipeline file over files, folders and URLs.
struct RunCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "run",
    _superCommandName: "darkroom",
    abstract: "Run a pipeline file over inputs (files, folders, file://, http(s):// and data: URLs).",
    discussion: """
      Outputs are written by the pipeline's "write" stage, or, when the pipeline ends with \
      "encode", into --output as {name}.{ext}. Exit status 0 when every input succeeded, 1 when \
      any failed (or, with --strict-notify, a notification failed, or the --report or --metrics \
      file could not be written), 2 when the pipeline file is invalid, 64 when the command line or the input list \
      is, 75 when an image table of the pipeline is locked by another process, 130 or 143 when \
      stopped by SIGINT or SIGTERM.

      An output's path is known before the run from its template: {name}, {variant} and \
      {pipeline} always, {ext} and {format} when the encode stage has a fixed format (else any \
      of the formats it may write), {width} and {height} never (they come from the image). \
      --dry-run prints each input's outputs (unknown parts as placeholders) and runs nothing. \
      --skip-existing does not run an input whose every output exists and is not older than the \
      input; an http(s) or data: URL has no time, so an existing output counts as done; an \
      output named by {width} or {height} cannot be found, so its input is always run.

      On a terminal, a progress bar shows the inputs finished, the failures, the rate \
      (images/s) and an ETA. The summary on stderr ends with "skipped N existing" and \
      "notifications failed N" when there are any.
      """)

  @OptionGroup var input: BatchInputs

  @Option(parsing: .unconditional, help: "How many HTTP transfers run at once (1 to 1024, default 8), apart from --jobs.")
  var fetchConcurrency: Int = 8

  @Option(name: .shortAndLong, help: "The output directory.")
  var output: String = "out"

  @Option(
    name: .shortAndLong, parsing: .unconditional,
    help: "How many images to process at once (1 to 256, default: the number of cores).")
  var jobs: Int?

  @Option(help: "Event output: 'jsonl' writes one JSON object per event to stdout.")
  var events: EventsFormat?

  @Option(help: "Only read local sources inside this directory (symlinks resolved).")
  var root: String?

  @Option(help: "Where cache stages keep disk stores and image tables whose directory is relative or unset.")
  var cacheDir: String?

  @Option(parsing: .unconditional, help: "Time limit per image, in seconds (0.000001 to 86400, default 60).")
  var timeout: Double?

  /// The time limit per image: `--timeout`, or 60 seconds.
  var timeLimit: Double { timeout ?? 60 }

  @Option(
    name: .customLong("stage-timeout"),
    help: ArgumentHelp(
      "Time limit for stages of one kind, as KIND=SECONDS (repeatable; 0.000001 to 86400 seconds), e.g. fetch=10.",
      valueName: "kind=seconds"))
  var stageTimeouts: [String] = []

  @Option(
    parsing: .unconditional,
    help:
      "Threads libvips uses inside one image (1 to 64, default 1; the runner parallelises across images). More than 1 makes strict detection of damaged JPEGs unreliable on libvips 8.14."
  )
  var vipsThreads: Int = 1

  @Flag(help: "Turn off stage fusion (shrink-on-load).")
  var noFusion = false

  @Flag(help: "List each file a folder held that was not taken (hidden, or not an image).")
  var verbose = false

  @Flag(help: "No progress bar or summary.")
  var quiet = false

  @Flag(help: "Do not run an input whose every output exists and is not older than the input (the rule is above).")
  var skipExisting = false

  @Flag(help: "Print each input's output paths (unknown parts as {width}, {height}…); run nothing, write nothing; exit 0.")
  var dryRun = false

  @Flag(help: "Fail the run (exit 1) when a notify stage's sink fails to deliver a notification (after its retries).")
  var strictNotify = false

  @Option(
    help: ArgumentHelp(
      "At the end, write Prometheus text metrics of the run to FILE (atomically, for node_exporter's textfile collector).",
      valueName: "file"))
  var metrics: String?

  @Option(
    help: ArgumentHelp(
      "At the end, write one self-contained HTML page: a contact sheet of the outputs written (200 a page), the failures, the time per image, the pipeline.",
      valueName: "file"))
  var report: String?

  @OptionGroup(title: "Shared queue (several machines)") var queue: QueueOptions

  @Option(help: "With --queue: the batch's name (default: the pipeline's name and a digest of the pipeline and inputs).")
  var batch: String?

  enum EventsFormat: String, ExpressibleByArgument { case jsonl }

  func run() async throws { try await run(signals: StopSignals()) }

  /// Runs the batch. `signals` was installed as early as the process could: a SIGINT or SIGTERM
  /// at any time after that (while the pipeline is loaded or the inputs are listed, too) stops
  /// the run in order, with the summary.
  func run(signals: StopSignals) async throws {
    if queue.queue != nil { return try await runQueued(signals: signals) }
    if dryRun { return try await runDry(signals: signals) }
    // Every writer of the run records which input has which file: a template that maps two
    // inputs onto one file fails the second instead of overwriting the first.
    let claims = OutputClaims()
    // What the pipeline file opens (notify stages' sinks, cache stores) is the run's, closed below.
    let resources = PipelineResources()
    var context = StageBuildContext(outputDirectory: output, allowedRoot: root, cacheDirectory: cacheDir, resources: resources)
    context.outputClaims = claims
    let set = try PipelineFile.load(input.pipeline, context: context)
    // libvips opens and starts (~20 ms: its hundred libraries, then its types) only when a stage
    // needs it: with a cache stage, on the first miss (a rerun whose images are all hits never
    // opens it); otherwise on a pool thread from here, while the inputs are listed, and the run
    // waits for it before its first image. A start under way when the process exits finishes
    // before exit() goes on (GLib aborted in exit() while a thread registered libvips' types).
    let vipsKinds: Set<String> = ["decode", "crop", "resize", "encode"]
    let stages = set.variants.flatMap(\.graph.stages)
    let usesVips = stages.contains { !vipsKinds.isDisjoint(with: [$0.kind] + $0.fusedKinds) }
    let caches = stages.contains { $0.kind == "cache" }
    Vips.requestConcurrency(vipsThreads)
    let vipsStart = usesVips && !caches ? VipsStart(threads: vipsThreads) : nil
    let listed = try await input.listed(signals: signals)
    // The memory store sheds half its entries whenever the cgroup runs short of memory.
    let pressureMonitor = MemoryStore.shared.trimOnMemoryPressure()
    defer { pressureMonitor.stop() }
    let expanded = InputExpander(recursive: input.recursive).expand(input.inputs + listed)
    for problem in expanded.problems { Terminal.error("failed: \(Terminal.printable(problem.input)): \(problem.message)") }
    Self.reportSkipped(expanded.skipped, quiet: quiet, verbose: verbose)
    // Counted here, so that the expansion (every input once more) is not kept alive for the run.
    let problemCount = expanded.problems.count
    let problemFailures = report == nil ? [] : expanded.problems.map(RunReport.Failure.init)
    let graphs = try Self.finalGraphs(set, output: output, noFusion: noFusion, claims: claims)
    try Self.checkStageTimeouts(try parsedStageTimeouts(), against: graphs.map(\.0))
    let (distinct, repeated) = OutputNaming.distinct(expanded.sources)
    let sources = OutputNaming.disambiguated(distinct, patterns: OutputPattern.all(in: graphs))
    let planned = try await skippingExisting(sources, graphs: graphs)
    if repeated > 0, !quiet {
      Terminal.error("note: \(repeated) input\(repeated == 1 ? " was" : "s were") given more than once; each is run once")
    }
    if sources.isEmpty, !signals.stopRequested {
      Terminal.error(
        problemCount == 0
          ? "error: no inputs: the given folders hold no image files, or the input list is empty"
          : "error: no input can be run")
      throw ExitStatus.inputsFailed
    }
    try await vipsStart?.ready()
    var variants: [BatchRunner.Variant] = []
    for (graph, name) in graphs {
      do {
        variants.append(BatchRunner.Variant(name: name, pipeline: try Pipeline(graph)))
      } catch {
        Terminal.error("error: \(error.message)")
        throw ExitStatus.invalidPipeline
      }
    }
    let cpuJobs = jobs ?? ProcessInfo.processInfo.activeProcessorCount
    // Downloads run ahead of the CPU work only when there is something to download.
    let remote = sources.contains { source in
      if case .url(let url) = source.location { return ["http", "https"].contains(url.scheme?.lowercased() ?? "") }
      return false
    }
    let lookAhead = Self.takesLookAhead(
      jobs: cpuJobs, graphs: graphs.map(\.graph), timeLimitsSet: timeout != nil || !stageTimeouts.isEmpty)
    // The curl loop (and OpenSSL) start only when something is to be downloaded.
    if remote { HTTPTransport.setMaxConcurrentTransfers(fetchConcurrency) }
    var runner = BatchRunner(
      variants: variants, jobs: cpuJobs, fetchConcurrency: fetchConcurrency,
      inFlight: cpuJobs + (remote ? fetchConcurrency : lookAhead ? 1 : 0), cpuQueued: lookAhead ? 1 : 0,
      timeout: Bounds.duration(timeLimit), stageTimeouts: try parsedStageTimeouts(), emitEvents: events == .jsonl,
      showProgress: !quiet && Terminal.stderrIsTerminal)
    // SIGINT and SIGTERM stop the batch in order: nothing new starts, then what is in flight is
    // cancelled; the summary says what was done, failed, cancelled and not started.
    runner.recordsOutputs = self.report != nil
    // Start-up is over: the code and constants it touched (the command line, the pipeline, the
    // input list) need not stay resident through the image work, whose peak memory they would
    // raise (case H, Docs/Performance.md). With a cache before libvips starts, the image work
    // begins at the first miss: a rerun of hits only would fault the code it runs back in.
    if usesVips, vipsStart == nil { Vips.releaseProgramPagesAtStart() } else { ProgramPages.release() }
    var report = await runner.run(planned.run, signals: signals)
    report.failed += problemCount
    report.skipped = planned.skipped
    report.failures += problemFailures
    let notifiers = resources.notifiers
    if let status = signals.exitStatus {
      AtomicFile.removeTemporaries()
      if !signals.cancelRequested { await resources.close() }
      report.notificationsFailed = Self.failedNotifications(notifiers, quiet: quiet)
      _ = await writeRunFiles(report, pipeline: set, thumbnails: !signals.cancelRequested, jobs: cpuJobs)
      if !quiet { Terminal.error(report.summary) }
      throw ExitCode(status)
    }
    signals.stop()
    // Notify stages' sinks deliver what they still hold (a webhook's retries) before exiting.
    await resources.close()
    report.notificationsFailed = Self.failedNotifications(notifiers, quiet: quiet)
    let written = await writeRunFiles(report, pipeline: set, thumbnails: true, jobs: cpuJobs)
    if !quiet { Terminal.error(report.summary) }
    if report.failed > 0 || !written || (strictNotify && report.notificationsFailed > 0) { throw ExitStatus.inputsFailed }
  }

  /// Whether the run lets one CPU stage call more than `jobs` in, to wait in the CPU pool's queue
  /// so that a thread that finishes a stage starts the next at once, and (for local files) keeps
  /// the one image more in flight that makes that call (case A 8 % faster, B 6 %;
  /// Docs/Concurrency.md). A run with downloads has images waiting already. Only when it costs
  /// little and changes nothing a user asked for:
  /// - `jobs` above 1: with `--jobs 1` the inputs run one at a time, in the order given;
  /// - no `--timeout` or `--stage-timeout` given: a time limit covers the wait for a slot, and the
  ///   waiting image would spend its own on another's work (the default 60 s hardly notices);
  /// - one variant whose decode is fused with its resize: it holds an image about the output's
  ///   size, where variants share a full decode (a 10,000-pixel photo is 300 MB).
  static func takesLookAhead(jobs: Int, graphs: [StageGraph], timeLimitsSet: Bool) -> Bool {
    guard jobs > 1, !timeLimitsSet, graphs.count == 1, let stages = graphs.first?.runnableStages else { return false }
    return stages.contains { $0.fusedKinds.first == ImageDecoder.kind }
  }

  /// Each variant's graph as it runs. A pipeline ending with "encode" (or only fetching) gets a
  /// default write stage: outputs land in --output as {name}.{ext}, or {name}-{variant}.{ext} for
  /// a pipeline with variants.
  ///
  /// With `capture` (a queue worker), the default writer keeps its outputs there as results.
  static func finalGraphs(
    _ set: PipelineSet, output: String, noFusion: Bool, claims: OutputClaims?, capture: ResultCollector? = nil
  ) throws -> [(graph: StageGraph, variant: String?)] {
    var graphs: [(graph: StageGraph, variant: String?)] = []
    for variant in set.variants {
      var graph = noFusion ? variant.graph.fusion(false) : variant.graph
      let template = variant.name == nil ? Writer.defaultTemplate : "{name}-{variant}.{ext}"
      let produced = ObjectIdentifier(graph.outputType)
      var writer = Writer(directory: output, template: template, overwrite: true, claims: claims)
      writer.capture = capture
      var saver = BytesWriter(
        directory: output, template: template.replacingOccurrences(of: "{variant}", with: variant.name ?? ""), claims: claims)
      saver.capture = capture
      let finalWriter: AnyStage? =
        produced == ObjectIdentifier(EncodedImage.self)
        ? AnyStage(writer) : produced == ObjectIdentifier(FetchedData.self) ? AnyStage(saver) : nil
      if let finalWriter {
        // A pipeline that only fetches has its bodies written into the output directory as
        // they arrive, and the saver links each file into place (HTTPOptions.spoolDirectory).
        let spooled = capture == nil && graph.stages.count == 1 && finalWriter.kind == BytesWriter.kind
        let stages = spooled ? graph.stages.map { $0.spoolingBodies(into: output) } : graph.stages
        do {
          graph = try StageGraph(name: graph.name, stages: stages + [finalWriter], fusion: graph.fusionEnabled)
        } catch {
          Terminal.error("error: \(error.message)")
          throw ExitStatus.invalidPipeline
        }
      }
      graphs.append((graph, variant.name))
    }
    return graphs
  }
}
