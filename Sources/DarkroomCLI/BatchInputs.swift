import ArgumentParser
import Darkroom

/// What a batch runs: the pipeline file and its inputs (`darkroom run` and `darkroom enqueue`).
struct BatchInputs: ParsableArguments {
  @Argument(help: "The pipeline JSON file.")
  var pipeline: String

  @Argument(help: "Input files, folders (their image files), file:// or http(s):// URLs.")
  var inputs: [String] = []

  @Option(help: "A file listing inputs, one URL or path per line ('-' for standard input).")
  var inputList: String?

  @Flag(help: "Descend into subfolders of folder inputs.")
  var recursive = false

  func validate() throws {
    if inputs.isEmpty && inputList == nil { throw ValidationError("give inputs, or --input-list FILE") }
  }

  /// The lines of --input-list (none without it); a list that cannot be read exits 64, saying why.
  /// A first signal ends a wait for a writer that never writes.
  func listed(signals: StopSignals) async throws -> [String] {
    guard let inputList else { return [] }
    do {
      return try await InputList.readOffPool(inputList, wakeup: signals.wakeup)
    } catch {
      Terminal.error("error: cannot read the input list \(Terminal.printable(inputList)): \(error)")
      throw ExitCode.validationFailure
    }
  }
}
