import Darkroom
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Turns command-line inputs into sources: files as they are, folders into their image files
/// (sorted), `file://` and other URLs into URL sources.
///
/// Folders are read with `readdir(3)`, name by name as bytes: a name that is not valid UTF-8 (which
/// Foundation would turn into another name, one that does not exist) is not taken but reported as
/// a problem that says so; so is a folder that cannot be read (no permission). Hidden names
/// (starting with `.`) and files that are not images (by extension) are skipped, and listed as
/// such; symlinked folders are not descended into with `--recursive` (a loop cannot make the walk
/// endless).
struct InputExpander {
  var recursive: Bool

  static let imageExtensions: Set<String> = ["jpg", "jpeg", "png", "gif", "webp", "tif", "tiff", "heic", "heif", "avif"]

  /// Inputs that cannot be run, each with why (shown as failures and counted).
  struct Problem: Sendable {
    var input: String
    var message: String
  }

  /// A file a folder held that was not taken, and why.
  struct Skipped: Sendable {
    var path: String
    /// Hidden (its name starts with `.`), or not an image by its extension.
    var hidden: Bool
  }

  func expand(_ inputs: [String]) -> (sources: [ImageSource], problems: [Problem], skipped: [Skipped]) {
    var sources: [ImageSource] = []
    var problems: [Problem] = []
    var skipped: [Skipped] = []
    for input in inputs {
      let source = ImageSource(input)
      guard case .file(let path) = source.location else {
        sources.append(source)
        continue
      }
      var isDirectory: ObjCBool = false
      guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
        if input.unicodeScalars.contains("\u{FFFD}"), !FileManager.default.fileExists(atPath: path) {
          problems.append(Problem(input: input, message: Self.notUTF8))
        } else {
          sources.append(source)
        }
        continue
      }
      walk(path, depth: 0, into: &sources, problems: &problems, skipped: &skipped)
    }
    return (sources, problems, skipped)
  }

  /// Why a folder cannot be listed (`errno` of `opendir`): counted as a failed input, never taken
  /// for a folder that holds no images.
  static func unreadableFolder(_ code: Int32) -> String {
    let kind = code == EACCES || code == EPERM ? "accessDenied" : code == ENOENT ? "notFound" : "invalidInput"
    return "\(kind): cannot read the folder: \(String(cString: strerror(code)))"
  }

  static let notUTF8 = "invalidInput: the file name is not valid UTF-8, so it cannot be named exactly; rename it (convmv can)"

  /// Adds the image files of `folder` (and of its subfolders with `recursive`), sorted by name.
  private func walk(
    _ folder: String, depth: Int, into sources: inout [ImageSource], problems: inout [Problem], skipped: inout [Skipped]
  ) {
    guard let directory = opendir(folder) else {
      problems.append(Problem(input: folder, message: Self.unreadableFolder(errno)))
      return
    }
    defer { closedir(directory) }
    var entries: [(name: String, isDirectory: Bool)] = []
    while let entry = readdir(directory) {
      let bytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix(while: { $0 != 0 })) }
      guard let first = bytes.first else { continue }
      if first == UInt8(ascii: ".") {
        if bytes != [UInt8(ascii: ".")], bytes != [UInt8(ascii: "."), UInt8(ascii: ".")] {
          skipped.append(
            Skipped(path: (folder as NSString).appendingPathComponent(String(decoding: bytes, as: UTF8.self)), hidden: true))
        }
        continue
      }
      guard let name = String(validating: bytes, as: UTF8.self) else {
        let shown = String(decoding: bytes, as: UTF8.self)
        problems.append(Problem(input: (folder as NSString).appendingPathComponent(shown), message: Self.notUTF8))
        continue
      }
      var isDirectory = entry.pointee.d_type == UInt8(DT_DIR)
      if entry.pointee.d_type == UInt8(DT_UNKNOWN) {  // some file systems do not say: ask, without following links
        var status = stat()
        isDirectory = lstat((folder as NSString).appendingPathComponent(name), &status) == 0 && status.st_mode & S_IFMT == S_IFDIR
      }
      entries.append((name, isDirectory))
    }
    for entry in entries.sorted(by: { $0.name < $1.name }) {
      let path = (folder as NSString).appendingPathComponent(entry.name)
      if entry.isDirectory {
        if recursive, depth < 64 { walk(path, depth: depth + 1, into: &sources, problems: &problems, skipped: &skipped) }
      } else if InputExpander.imageExtensions.contains(PathText.pathExtension(entry.name).lowercased()) {
        sources.append(ImageSource(path: path))
      } else {
        skipped.append(Skipped(path: path, hidden: false))
      }
    }
  }
}
