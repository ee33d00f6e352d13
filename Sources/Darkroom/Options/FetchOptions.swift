import Foundation

/// JSON options of the `fetch` stage.
public struct FetchOptions: StageOptions {
  public var maxBytes: Int
  public var root: String?

  public static let specs = [
    OptionSpec(
      "maxBytes", .integer(min: 1), default: 50_000_000,
      "The largest source accepted, in bytes; bigger sources fail with tooLarge."),
    OptionSpec(
      "root", .string,
      "Local sources must resolve (symlinks included) to a path inside this directory (and inside the runner's --root, if given)."
    ),
  ]
}

/// JSON options of the `decode` stage.
public struct DecodeOptions: StageOptions {
  public var maxPixels: Int
  public var autoRotate: Bool
  public var convertToSRGB: Bool
  public var lenient: Bool

  public static let specs = [
    OptionSpec(
      "maxPixels", .integer(min: 1), default: 100_000_000,
      "The largest width × height accepted, checked from the header before decoding; larger images fail with imageTooLarge."),
    OptionSpec("autoRotate", .boolean, default: true, "Apply the EXIF orientation so the image is upright."),
    OptionSpec("convertToSRGB", .boolean, default: true, "Convert embedded ICC profiles (and CMYK) to sRGB."),
    OptionSpec(
      "lenient", .boolean, default: false,
      "Accept truncated or damaged pixel data and return what could be decoded, marked partial (decodes eagerly)."),
  ]
}

/// JSON options of the `write` stage.
public struct WriteOptions: StageOptions {
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
