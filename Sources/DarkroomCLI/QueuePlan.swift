import ArgumentParser
import Darkroom
import DarkroomCore
import DarkroomPostgres
import Foundation

/// What `darkroom enqueue` and `darkroom run --queue` put in the queue: the pipeline file's text
/// and name, and every input as a source any machine can open (an absolute path or a URL) with
/// the output name the runner would give it, worked out for the whole batch at once.
struct QueuePlan {
  var pipelineText: String
  var pipelineName: String
  var jobs: [JobSource]
  /// Each local file's version (its real path, size, time and inode) or "missing": a file
  /// changed, or made since, makes another batch, so that a batch run again is never stale.
  var versions: [String]
  /// Inputs that could not be taken (a missing file, a malformed URL), already reported.
  var problems: Int

  /// The batch name used when none is given: the pipeline's name and a digest of the pipeline,
  /// its sources and their files' versions, so that the same command on the same files names the
  /// same batch (and does nothing new), and a changed file a new one.
  var defaultBatchName: String {
    let sources = zip(jobs.map(\.source), versions).map { $0 + "\u{1F}" + $1 }.sorted().joined(separator: "\n")
    var prefix = ""
    for character in pipelineName {
      guard prefix.utf8.count + character.utf8.count <= 100 else { break }
      prefix.append(character)
    }
    return prefix + "-" + RequestDigest.hex(pipelineText + "\u{0}" + sources, bytes: 8)
  }

  /// Reads and checks the pipeline file (nothing is opened: cache stores stay closed), lists
  /// the inputs, and names their outputs as `darkroom run` would.
  static func make(_ input: BatchInputs, output: String, noFusion: Bool, signals: StopSignals) async throws -> QueuePlan {
    let path = input.pipeline
    let text: String
    let stem: String
    do {
      (text, stem) = try PipelineDefinition.readDefinition(path)
    } catch {
      Terminal.error("error: invalid pipeline: \(error.message)")
      throw ExitStatus.invalidPipeline
    }
    // Checked as the workers will build it: confined to their folders.
    var context = StageBuildContext(outputDirectory: output, validatingOnly: true)
    context.confinesFiles = true
    let set = try PipelineFile.load(path, context: context)
    let listed = try await input.listed(signals: signals)
    let expanded = InputExpander(recursive: input.recursive).expand(input.inputs + listed)
    for problem in expanded.problems { Terminal.error("failed: \(Terminal.printable(problem.input)): \(problem.message)") }
    var problems = expanded.problems.count
    let graphs = try RunCommand.finalGraphs(set, output: output, noFusion: noFusion, claims: nil)
    let (distinct, _) = OutputNaming.distinct(expanded.sources)
    var jobs: [JobSource] = []
    var files: [ImageSource?] = []
    for source in OutputNaming.disambiguated(distinct, patterns: OutputPattern.all(in: graphs)) {
      let queued: String
      switch source.location {
      case .file(let file): queued = ImageSource.absolute(file)
      case .url(let url): queued = url.absoluteString
      case .malformed:
        Terminal.error("failed: \(Terminal.printable(source.description)): not a path or URL a worker can open")
        problems += 1
        continue
      }
      guard queued.utf8.count <= PostgresJobQueue.maxSourceBytes, !queued.contains("\0") else {
        Terminal.error(
          "failed: \(Terminal.printable(source.description)): a queued source is at most \(PostgresJobQueue.maxSourceBytes) "
            + "bytes (\(queued.utf8.count) here); give such an image as a file")
        problems += 1
        continue
      }
      jobs.append(JobSource(queued, name: source.name))
      if case .file = source.location { files.append(source) } else { files.append(nil) }
    }
    let local = files
    let versions = try await BlockingPool.shared.run { local.map { $0.map { CacheKey.identity(of: $0) ?? "missing" } ?? "" } }
    return QueuePlan(
      pipelineText: text, pipelineName: stem.isEmpty ? "pipeline" : stem, jobs: jobs, versions: versions, problems: problems)
  }
}
