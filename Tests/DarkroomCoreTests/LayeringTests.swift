import Foundation
import Testing

/// The one road a run takes (Docs/Architecture.md): the executor knows the layers only through
/// `RunLayer`, and each marker protocol is read only beside its declaration. These read the
/// package's own sources.
@Suite("Layering")
struct LayeringTests {
  static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("Sources")

  /// The Swift files under `folder` (relative to Sources), with their comments removed.
  static func code(under folder: String) throws -> [(path: String, code: String)] {
    let root = sources.appendingPathComponent(folder)
    guard let walk = FileManager.default.enumerator(atPath: root.path) else { return [] }
    var files: [(String, String)] = []
    for case let relative as String in walk where relative.hasSuffix(".swift") {
      let path = root.appendingPathComponent(relative).path
      let text = try String(contentsOfFile: path, encoding: .utf8)
      let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
        line.range(of: "//").map { String(line[..<$0.lowerBound]) } ?? String(line)
      }
      files.append((folder + "/" + relative, lines.joined(separator: "\n")))
    }
    return files.sorted { $0.0 < $1.0 }
  }

  /// The names of the types declared at the top level of `files`.
  static func declaredTypes(in files: [(path: String, code: String)]) -> Set<String> {
    let kinds = ["class", "struct", "enum", "protocol", "actor", "typealias"]
    var names: Set<String> = []
    for file in files {
      for line in file.code.split(separator: "\n") where !line.hasPrefix(" ") {
        let words = line.split(whereSeparator: { !$0.isLetter && !$0.isNumber && $0 != "_" }).map(String.init)
        for (index, word) in words.enumerated() where kinds.contains(word) && index + 1 < words.count {
          names.insert(words[index + 1])
          break
        }
      }
    }
    return names
  }

  static func mentions(_ name: String, in code: String) -> Bool {
    var rest = code[...]
    while let found = rest.range(of: name) {
      let before = found.lowerBound == code.startIndex ? nil : code[code.index(before: found.lowerBound)]
      let after = found.upperBound == code.endIndex ? nil : code[found.upperBound]
      let boundary: (Character?) -> Bool = { character in
        guard let character else { return true }
        return !(character.isLetter || character.isNumber || character == "_")
      }
      if boundary(before) && boundary(after) { return true }
      rest = code[found.upperBound...]
    }
    return false
  }

  @Test("the executor names no type of the loading or caching code: they plug in as layers")
  func executorStandsAlone() throws {
    let layered = try Self.code(under: "DarkroomCore/Loading") + Self.code(under: "DarkroomCore/Caching")
    let names = Self.declaredTypes(in: layered)
    #expect(names.contains("ImageLoader") && names.contains("CheckpointLayer") && names.contains("Coalescer"))
    let execution = try Self.code(under: "DarkroomCore/Execution")
    #expect(!execution.isEmpty)
    for file in execution {
      let named = names.filter { Self.mentions($0, in: file.code) }.sorted()
      #expect(named.isEmpty, "\(file.path) names \(named)")
    }
  }

  @Test("each marker protocol is read (is, as?, as!) only in the folder that declares it")
  func markersAreReadBesideTheirDeclaration() throws {
    let markers = [
      "CheckpointStage", "RevalidatingStage", "ContextSensitiveStage", "LayeredStage", "FusibleStage", "ShareableValue",
      "SummarizableOutput", "SourceCarrying", "ConditionalFetchTransport", "PassThroughStageFactory", "CacheSerializable",
    ]
    var folders: [String: String] = [:]
    let all = try Self.code(under: "")
    for file in all {
      for marker in markers where file.code.contains("protocol \(marker)") {
        folders[marker] = (file.path as NSString).deletingLastPathComponent
      }
    }
    #expect(Set(folders.keys) == Set(markers), "every marker is declared somewhere")
    for file in all {
      let folder = (file.path as NSString).deletingLastPathComponent
      for marker in markers where folders[marker] != folder {
        for cast in ["is any \(marker)", "as? any \(marker)", "as! any \(marker)", "is \(marker)", "as? \(marker)"] {
          #expect(!Self.mentions(cast, in: file.code), "\(file.path) reads \(marker) (\(cast))")
        }
      }
    }
  }
}
