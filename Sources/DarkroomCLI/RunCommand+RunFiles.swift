import ArgumentParser
import Darkroom
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

extension RunCommand {
  /// Checks `--report` and `--metrics` before anything runs (exit 64): each names a file whose
  /// folder exists and may be written, and that is not a folder; the two are not one file; and
  /// neither is taken with `--queue` or `--dry-run`.
  func validateRunFiles() throws {
    let files = [("--report", report), ("--metrics", metrics)].compactMap { name, path in path.map { (name, $0) } }
    if queue.queue != nil, !files.isEmpty || skipExisting || dryRun {
      throw ValidationError("--report, --metrics, --skip-existing and --dry-run are not available with --queue")
    }
    if dryRun, let (name, _) = files.first { throw ValidationError("\(name) writes a file: it is not taken with --dry-run") }
    for (name, path) in files { try Self.checkWritableFile(name, path) }
    if let report, let metrics, Self.nameOneFile(report, metrics) {
      throw ValidationError("--report and --metrics name one file, \(Terminal.printable(report)): give two")
    }
  }

  /// True when the two paths name one file: the same last component in one folder, the folder
  /// compared by identity (device and inode), so that `a/r`, `./a/r`, `/abs/a/r` and a path
  /// through a symlinked folder are one file. Names, not contents: both are written by rename,
  /// which replaces the name (two hard links to one file are two files afterwards).
  static func nameOneFile(_ first: String, _ second: String) -> Bool {
    guard PathText.lastComponent(first) == PathText.lastComponent(second) else { return false }
    func folderIdentity(_ path: String) -> (dev_t, ino_t)? {
      let folder = PathText.folder(path)
      var status = stat()
      guard stat(folder.isEmpty ? "." : folder, &status) == 0 else { return nil }
      return (status.st_dev, status.st_ino)
    }
    guard let one = folderIdentity(first), let other = folderIdentity(second) else { return first == second }
    return one == other
  }

  /// Refuses (exit 64) a path that cannot take a file written by rename: an empty one, a folder,
  /// or one whose folder is missing, is not a folder, or may not be written.
  static func checkWritableFile(_ option: String, _ path: String) throws {
    let shown = Terminal.printable(path)
    guard !path.isEmpty, !path.hasSuffix("/") else { throw ValidationError("\(option) takes a file name, got \"\(shown)\"") }
    var status = stat()
    if stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR {
      throw ValidationError("\(option) \(shown) is a folder: give a file name")
    }
    let folder = PathText.folder(path)
    let directory = folder.isEmpty ? "." : folder
    guard stat(directory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
      throw ValidationError("\(option) \(shown): the folder \(Terminal.printable(directory)) does not exist; create it first")
    }
    guard access(directory, W_OK | X_OK) == 0 else {
      throw ValidationError("\(option) \(shown): the folder \(Terminal.printable(directory)) is not writable")
    }
  }

  /// With `--skip-existing`, the inputs whose outputs exist and are up to date
  /// (``OutputPlan/isDone(_:)``) are left out; says once which templates cannot be checked.
  func skippingExisting(_ sources: [ImageSource], graphs: [(graph: StageGraph, variant: String?)]) async throws -> (
    run: [ImageSource], skipped: Int
  ) {
    guard skipExisting else { return (sources, 0) }
    let plan = OutputPlan(graphs: graphs)
    if !quiet { Self.noteUnknowable(plan) }
    let kept = try await BlockingPool.shared.run { sources.filter { !plan.isDone($0) } }
    return (kept, sources.count - kept.count)
  }

  /// Says which templates name outputs by the image's size (their inputs are always run).
  static func noteUnknowable(_ plan: OutputPlan) {
    let sized = plan.writings.filter { !$0.saves && ($0.template.contains("{width}") || $0.template.contains("{height}")) }
    for template in Set(sized.map(\.template)).sorted() {
      Terminal.error(
        "note: --skip-existing: the template \(Terminal.printable(template)) names outputs by the image's size, "
          + "known only once it is decoded: its inputs are run")
    }
  }

  /// `--dry-run`: loads and checks the pipeline (opening nothing), lists the inputs, and prints
  /// `INPUT -> PATH` for each output on stdout (with `--skip-existing`, `INPUT -> PATH (exists,
  /// skipped)` for inputs that would be skipped), then a count on stderr. Exit 0.
  func runDry(signals: StopSignals) async throws {
    let context = StageBuildContext(
      outputDirectory: output, allowedRoot: root, cacheDirectory: cacheDir, validatingOnly: true)
    let set = try PipelineFile.load(input.pipeline, context: context)
    let listed = try await input.listed(signals: signals)
    let expanded = InputExpander(recursive: input.recursive).expand(input.inputs + listed)
    for problem in expanded.problems { Terminal.error("failed: \(Terminal.printable(problem.input)): \(problem.message)") }
    Self.reportSkipped(expanded.skipped, quiet: quiet, verbose: verbose)
    let graphs = try Self.finalGraphs(set, output: output, noFusion: noFusion, claims: nil)
    try Self.checkStageTimeouts(try parsedStageTimeouts(), against: graphs.map(\.0))
    let sources = OutputNaming.disambiguated(
      OutputNaming.distinct(expanded.sources).sources, patterns: OutputPattern.all(in: graphs))
    let plan = OutputPlan(graphs: graphs)
    let skipExisting = skipExisting
    let done = try await BlockingPool.shared.run { sources.map { skipExisting && plan.isDone($0) } }
    var outputs = 0
    var unknown = 0
    for (source, isDone) in zip(sources, done) {
      let planned = plan.outputs(of: source)
      if planned.isEmpty { Terminal.out("\(Terminal.printable(source.description)) -> (no file written)") }
      for output in planned {
        outputs += 1
        if output.candidates == nil { unknown += 1 }
        Terminal.out(
          "\(Terminal.printable(source.description)) -> \(Terminal.printable(output.shown))"
            + (isDone ? " (exists, skipped)" : ""))
      }
    }
    if !quiet {
      let skipped = done.filter { $0 }.count
      Terminal.error(
        "dry run: \(sources.count) input\(sources.count == 1 ? "" : "s"), \(outputs) output\(outputs == 1 ? "" : "s")"
          + (unknown > 0 ? " (\(unknown) named by the image's size, known once decoded)" : "")
          + (skipExisting ? ", \(skipped) skipped as existing" : "")
          + (expanded.problems.isEmpty
            ? "" : ", \(expanded.problems.count) input\(expanded.problems.count == 1 ? "" : "s") cannot be run")
          + "; nothing was run or written")
    }
  }

  /// The notifications that `notify` stages' sinks failed to deliver (after their retries); says
  /// on stderr, per sink, how many and the last error.
  static func failedNotifications(_ notifiers: [Notifier], quiet: Bool) -> Int {
    var failed = 0
    for notifier in notifiers {
      for (sink, statistics) in notifier.statistics where statistics.failed > 0 {
        failed += statistics.failed
        if !quiet {
          Terminal.error(
            "failed: \(statistics.failed) of \(statistics.posted) notification\(statistics.posted == 1 ? "" : "s") to \(sink)"
              + (statistics.lastError.map { ": \(Terminal.printable($0))" } ?? ""))
        }
      }
    }
    return failed
  }

  /// Writes `--metrics` and `--report` (each atomically); says why one cannot be written and
  /// returns false then.
  func writeRunFiles(_ report: BatchRunner.Report, pipeline set: PipelineSet, thumbnails: Bool, jobs: Int) async -> Bool {
    var written = true
    if let metrics {
      let text = RunMetrics(
        pipeline: set.name, done: report.done, failed: report.failed, cancelled: report.cancelled, notStarted: report.notStarted,
        skipped: report.skipped, notificationsFailed: report.notificationsFailed, durations: report.durations,
        seconds: report.elapsed, peakResidentBytes: BatchRunner.Report.peakResidentKilobytes.map { $0 * 1024 }, finishedAt: Date()
      ).text
      written = await Self.write(Array(text.utf8), to: metrics, what: "the metrics") && written
    }
    if let path = self.report {
      var outputs = report.outputs
      if thumbnails {
        if !quiet && Terminal.stderrIsTerminal { Terminal.status("making the report's \(outputs.count) thumbnails…") }
        await RunReport.addThumbnails(to: &outputs, jobs: jobs)
        if !quiet && Terminal.stderrIsTerminal { Terminal.status("") }
      }
      let page = RunReport(
        pipelineName: set.name, pipelineText: await RunReport.pipelineText(input.pipeline), summary: report.summary,
        outputs: outputs, failures: report.failures, durations: report.durations)
      do {
        written = await Self.write(Array(try page.html().utf8), to: path, what: "the report") && written
      } catch {
        Terminal.error("error: cannot make the report: \(error)")
        written = false
      }
    }
    return written
  }

  /// Writes `bytes` to `path` whole or not at all, off the cooperative pool.
  static func write(_ bytes: [UInt8], to path: String, what: String) async -> Bool {
    do {
      try await BlockingPool.shared.run { try AtomicFile.write(ImageBytes(bytes), to: path) }
      return true
    } catch {
      Terminal.error(
        "error: cannot write \(what) to \(Terminal.printable(path)): \(Terminal.printable("\(error.localizedDescription)"))")
      return false
    }
  }
}

extension RunReport.Failure {
  /// An input that could not be run at all (`notFound: …` from the expansion).
  init(_ problem: InputExpander.Problem) {
    let parts = problem.message.split(separator: ":", maxSplits: 1).map(String.init)
    let coded = parts.count == 2 && !parts[0].contains(" ")
    self.init(
      source: problem.input, variant: nil, code: coded ? parts[0] : "invalidInput",
      message: coded ? parts[1].trimmingCharacters(in: .whitespaces) : problem.message, stage: nil)
  }
}
