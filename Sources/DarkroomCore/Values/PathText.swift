/// Path text taken apart on its bytes: the last component, the folder before it, the extension.
///
/// Foundation's `NSString` path methods (`lastPathComponent`, `deletingLastPathComponent`,
/// `pathExtension`, `deletingPathExtension`) trap on some paths: `"a//é"`, `"a//\r\nb"` and even
/// the ASCII `"////..///"` stop the process (Foundation of Swift 6.3 on Linux). Paths come from
/// the command line, pipeline files, input lists and folder walks, so Darkroom takes them apart
/// here instead. The results are those of the `NSString` methods wherever those do not trap: a
/// `/` byte separates components (as it does to the file system, even before a combining mark),
/// trailing slashes are ignored, and an extension starts at the last dot of the last component
/// unless that dot begins it (`.profile`) or the component is `..`; a dot with a combining mark
/// on it is a letter, not a dot, as it is to `NSString`.
///
/// ```swift
/// PathText.lastComponent("photos/2024/a.jpg")     // "a.jpg"
/// PathText.folder("photos/2024/a.jpg")            // "photos/2024"
/// PathText.pathExtension("photos/a.tar.gz")       // "gz"
/// PathText.stem("photos/a.tar.gz")                // "a.tar"
/// ```
package enum PathText {
  private static let slash = UInt8(ascii: "/")

  /// The last component (`/` for a path of slashes only, `""` for an empty one).
  package static func lastComponent(_ path: String) -> String {
    guard let (start, end) = lastComponentBounds(path) else { return path.isEmpty ? "" : "/" }
    return String(Substring(path.utf8[start..<end]))
  }

  /// The path without its last component: `"a/b"` → `"a"`, `"/a"` → `"/"`, `"a"` → `""`, `"/"` →
  /// `"/"`; slashes between the folder and the component go with the component.
  package static func folder(_ path: String) -> String {
    let bytes = path.utf8
    guard let (start, _) = lastComponentBounds(path) else { return path.isEmpty ? "" : "/" }
    var end = start
    while end > bytes.startIndex, bytes[bytes.index(before: end)] == slash { end = bytes.index(before: end) }
    if end == bytes.startIndex { return start == bytes.startIndex ? "" : "/" }
    return String(Substring(bytes[bytes.startIndex..<end]))
  }

  /// The extension of the last component, without its dot (`""` when it has none).
  package static func pathExtension(_ path: String) -> String {
    guard let (start, end) = lastComponentBounds(path) else { return "" }
    let component = Substring(path.utf8[start..<end])
    guard let dot = extensionDot(component) else { return "" }
    return String(component[component.index(after: dot)...])
  }

  /// The last component without its extension (`/` for a path of slashes only).
  package static func stem(_ path: String) -> String {
    guard let (start, end) = lastComponentBounds(path) else { return path.isEmpty ? "" : "/" }
    let component = Substring(path.utf8[start..<end])
    return String(component[..<(extensionDot(component) ?? component.endIndex)])
  }

  /// The path without the extension of its last component, its folders kept, repeated slashes
  /// made one and trailing ones dropped (`"a//b/c.jpg/"` → `"a/b/c"`), as `deletingPathExtension`
  /// gives it. A URL's decoded last segment (`users%2F42%2Favatar.jpg`) is named this way.
  package static func deletingExtension(_ path: String) -> String {
    guard let (start, end) = lastComponentBounds(path) else { return path.isEmpty ? "" : "/" }
    let component = Substring(path.utf8[start..<end])
    let stem = component[..<(extensionDot(component) ?? component.endIndex)]
    guard start > path.startIndex else { return String(stem) }  // no folders (a URL's last segment, mostly)
    var folder: [UInt8] = []
    for byte in path.utf8[..<start] where byte != slash || folder.last != slash { folder.append(byte) }
    return String(decoding: folder, as: UTF8.self) + stem
  }

  /// Where the last component starts and ends (trailing slashes ignored); `nil` when the path
  /// has no component.
  private static func lastComponentBounds(_ path: String) -> (String.Index, String.Index)? {
    let bytes = path.utf8
    var end = bytes.endIndex
    while end > bytes.startIndex, bytes[bytes.index(before: end)] == slash { end = bytes.index(before: end) }
    guard end > bytes.startIndex else { return nil }
    let start = bytes[..<end].lastIndex(of: slash).map { bytes.index(after: $0) } ?? bytes.startIndex
    return (start, end)
  }

  /// The dot that starts the component's extension, if it has one: its last character `.`
  /// (a dot with a combining mark is another character), unless that begins the component or
  /// the component is `..`.
  private static func extensionDot(_ component: Substring) -> String.Index? {
    guard let dot = component.lastIndex(of: "."), dot != component.startIndex, component != ".." else { return nil }
    return dot
  }
}
