import ArgumentParser
import Darkroom
import Foundation

/// `darkroom validate FILE...`: checks pipeline files without running them.
struct ValidateCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "validate", abstract: "Validate pipeline files; print every problem with its JSON path.")

  @Argument(help: "Pipeline JSON files.")
  var files: [String]

  @Flag(help: "Print nothing for valid files.")
  var quiet = false

  func run() throws {
    var invalid = 0
    var unchecked = 0
    for file in files {
      do {
        let set = try PipelineDefinition.loadSet(
          contentsOf: file, registry: Darkroom.standardRegistry, context: StageBuildContext(validatingOnly: true))
        if !quiet {
          let plans = set.variants.map { variant in
            (variant.name.map { "\($0): " } ?? "") + variant.graph.runnableStages.map(\.kind).joined(separator: " → ")
          }
          print("ok: \(file) (\"\(set.name)\": \(plans.joined(separator: "; ")))")
        }
      } catch {
        let codes = error.codes
        if codes.contains(.libraryUnavailable) {
          // An overlay's watermark could not be checked: the installation is at fault, not the file.
          unchecked += 1
          Terminal.error("error: cannot check \(file): \(error.message)")
        } else {
          invalid += 1
          Terminal.error("invalid: \(error.message)")
        }
      }
    }
    if invalid > 0 { throw ExitStatus.invalidPipeline }
    if unchecked > 0 { throw ExitCode.failure }
  }
}

/// `darkroom stages`: the registered stage kinds and their options.
struct StagesCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "stages", abstract: "List stage kinds, their options and defaults.")

  @Flag(help: "Print Markdown (the source of Docs/Stages.md).")
  var markdown = false

  func run() {
    let registry = Darkroom.standardRegistry
    print(markdown ? StageCatalog.markdown(for: registry) : StageCatalog.text(for: registry), terminator: "")
  }
}

/// `darkroom schema`: a JSON Schema for pipeline files.
struct SchemaCommand: ParsableCommand {
  static let configuration = CommandConfiguration(commandName: "schema", abstract: "Print a JSON Schema for pipeline files.")

  func run() {
    print(JSONSchema.document(for: Darkroom.standardRegistry).prettyText)
  }
}
