import Foundation

/// Test folders for the runner: copies of the example images under chosen names, and pipeline
/// files written from JSON text.
enum ExampleInputs {
  /// A new folder whose `in/` holds copies of `Examples/images` files: (name, original) pairs.
  static func folder(_ names: [(String, String)]) throws -> String {
    let folder = try Runner.temporaryDirectory()
    try FileManager.default.createDirectory(atPath: folder + "/in", withIntermediateDirectories: true)
    for (name, original) in names {
      try FileManager.default.copyItem(
        atPath: Runner.package.path + "/Examples/images/" + original, toPath: folder + "/in/" + name)
    }
    return folder
  }

  /// Writes a pipeline file; returns its path.
  @discardableResult
  static func pipeline(_ json: String, at path: String) throws -> String {
    try Data(json.utf8).write(to: URL(fileURLWithPath: path))
    return path
  }
}
