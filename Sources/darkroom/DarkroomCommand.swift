import ArgumentParser
import Darkroom

/// The `darkroom` runner: runs pipeline files over inputs, validates them, lists stages.
@main
struct DarkroomCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "darkroom",
    abstract: "Run Darkroom image pipelines over files, folders and URLs.",
    discussion: """
      Exit status: 0 when every input succeeded, 1 when any input failed, 2 when a pipeline file is \
      invalid, 64 when the command line is wrong.
      """,
    subcommands: [RunCommand.self, ValidateCommand.self, StagesCommand.self, SchemaCommand.self]
  )
}

/// Exit statuses shared by the subcommands.
enum ExitStatus {
  static let inputsFailed = ExitCode(1)
  static let invalidPipeline = ExitCode(2)
}
