import Foundation

/// JSON options of the `write` stage.
package struct WriteOptions: StageOptions {
  public var directory: String?
  public var template: String
  public var overwrite: Bool

  public static let specs = [
    OptionSpec(
      "directory", .string,
      "A subdirectory of the runner's --output to write into (relative, no \"..\"); without a runner, a directory of its own."),
    OptionSpec(
      "template", .string, default: "{name}.{ext}",
      "The file name: {name}, {variant}, {pipeline}, {width}, {height}, {format}, {ext}; may contain subdirectories, never \"..\"."
    ),
    OptionSpec(
      "overwrite", .boolean, default: true, "Replace an existing file; when false an existing file fails the operation."),
  ]

  public func problems() -> [OptionProblem] {
    var problems = Writer.problems(in: template).map { OptionProblem(option: "template", $0) }
    if let directory, directory.split(separator: "/").contains("..") {
      problems.append(OptionProblem(option: "directory", "may not contain \"..\": outputs stay inside the output directory"))
    }
    return problems
  }

  /// The directory to write into: inside the runner's output directory when there is one.
  func resolvedDirectory(in context: StageBuildContext) -> String {
    guard let base = context.outputDirectory else { return directory ?? "." }
    guard let directory, !directory.isEmpty else { return base }
    let relative = directory.drop { $0 == "/" }
    return (base as NSString).appendingPathComponent(String(relative))
  }
}
