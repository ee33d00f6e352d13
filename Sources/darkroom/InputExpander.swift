import Darkroom
import Foundation

/// Turns command-line inputs into sources: files as they are, folders into their image files
/// (sorted), `file://` and other URLs into URL sources.
struct InputExpander {
  var recursive: Bool

  static let imageExtensions: Set<String> = ["jpg", "jpeg", "png", "gif", "webp", "tif", "tiff", "heic", "heif", "avif"]

  /// Reads an input list: one URL or path per line, blank lines and `#` comments skipped; `-`
  /// reads standard input.
  static func readList(_ path: String) throws -> [String] {
    let data = path == "-" ? FileHandle.standardInput.readDataToEndOfFile() : try Data(contentsOf: URL(fileURLWithPath: path))
    return String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).map {
      $0.trimmingCharacters(in: .whitespaces)
    }
    .filter { !$0.isEmpty && !$0.hasPrefix("#") }
  }

  func expand(_ inputs: [String]) -> [ImageSource] {
    inputs.flatMap { input -> [ImageSource] in
      let source = ImageSource(input)
      guard case .file(let path) = source.location else { return [source] }
      var isDirectory: ObjCBool = false
      guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
        return [source]
      }
      return files(in: path).map { ImageSource(path: $0) }
    }
  }

  private func files(in folder: String) -> [String] {
    let manager = FileManager.default
    let names: [String]
    if recursive {
      names = (manager.enumerator(atPath: folder)?.allObjects as? [String]) ?? []
    } else {
      names = (try? manager.contentsOfDirectory(atPath: folder)) ?? []
    }
    return names.filter { name in
      !name.split(separator: "/").contains { $0.hasPrefix(".") }
        && InputExpander.imageExtensions.contains((name as NSString).pathExtension.lowercased())
    }.sorted().map { (folder as NSString).appendingPathComponent($0) }
  }
}
