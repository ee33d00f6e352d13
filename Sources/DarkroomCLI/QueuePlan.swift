import ArgumentParser
import Darkroom
import DarkroomCore
import Foundation

/// What `darkroom enqueue` and `darkroom run --queue` put in the queue: the pipeline file's text
/// and name, and every input as a source any machine can open (an absolute path or a URL) with
/// the output name the runner would give it, worked out for the whole batch at once.
struct QueuePlan {
  var pipelineText: String
  var pipelineName: String
  var jobs: [JobSource]
  /// Inputs that could not be taken (a missing file, a malformed URL), already reported.
  var problems: Int

  /// The batch name used when none is given: the pipeline's name and a digest of the pipeline
  /// and its sources, so that the same command names the same batch (and does nothing new).
  var defaultBatchName: String {
    let sources = jobs.map(\.source).sorted().joined(separator: "\n")
    return pipelineName.prefix(100) + "-" + RequestDigest.hex(pipelineText + "\u{0}" + sources, bytes: 8)
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
    let set = try PipelineFile.load(path, context: StageBuildContext(outputDirectory: output, validatingOnly: true))
    let listed = try await input.listed(signals: signals)
    let expanded = InputExpander(recursive: input.recursive).expand(input.inputs + listed)
    for problem in expanded.problems { Terminal.error("failed: \(Terminal.printable(problem.input)): \(problem.message)") }
    var problems = expanded.problems.count
    let graphs = try RunCommand.finalGraphs(set, output: output, noFusion: noFusion, claims: nil)
    let (distinct, _) = OutputNaming.distinct(expanded.sources)
    var jobs: [JobSource] = []
    for source in OutputNaming.disambiguated(distinct, patterns: OutputPattern.all(in: graphs)) {
      switch source.location {
      case .file(let file): jobs.append(JobSource(ImageSource.absolute(file), name: source.name))
      case .url(let url): jobs.append(JobSource(url.absoluteString, name: source.name))
      case .malformed:
        Terminal.error("failed: \(Terminal.printable(source.description)): not a path or URL a worker can open")
        problems += 1
      }
    }
    return QueuePlan(pipelineText: text, pipelineName: stem.isEmpty ? "pipeline" : stem, jobs: jobs, problems: problems)
  }
}
