import Foundation
import Testing

/// Every public type of the library shows how it is used: its doc comment has a ```swift example
/// (issue 14). These read the package's own sources, like ``LayeringTests``.
@Suite("Public documentation")
struct PublicDocumentationTests {
  /// Targets that are executables, not library modules: their types are not API.
  static let executables: Set<String> = ["DarkroomCLI", "darkroom-bench", "darkroom-fuzz"]

  /// A top-level public type declaration and the doc comment above it.
  struct Declaration {
    var name: String
    var path: String
    var line: Int
    var doc: [String]
  }

  /// The name declared by an unindented `public [final|indirect|…] struct|class|enum|protocol|actor Name`
  /// line (attributes on the line are skipped), or `nil`.
  static func declaredName(_ line: Substring) -> String? {
    guard let first = line.first, !first.isWhitespace else { return nil }  // nested types are not top-level
    var words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    while let first = words.first, first.hasPrefix("@") { words.removeFirst() }
    guard words.first == "public" else { return nil }
    words.removeFirst()
    let modifiers: Set<String> = ["final", "indirect", "nonisolated", "nonisolated(unsafe)"]
    while let first = words.first, modifiers.contains(first) { words.removeFirst() }
    let kinds: Set<String> = ["struct", "class", "enum", "protocol", "actor"]
    guard words.count >= 2, kinds.contains(words[0]) else { return nil }
    let name = words[1].prefix { $0.isLetter || $0.isNumber || $0 == "_" }
    return name.isEmpty ? nil : String(name)
  }

  /// The top-level public types declared in the library modules' Swift files.
  static func publicDeclarations() throws -> [Declaration] {
    let sources = LayeringTests.sources
    guard let walk = FileManager.default.enumerator(atPath: sources.path) else { return [] }
    var declarations: [Declaration] = []
    for case let relative as String in walk where relative.hasSuffix(".swift") {
      guard let module = relative.split(separator: "/").first, !executables.contains(String(module)) else { continue }
      let text = try String(contentsOfFile: sources.appendingPathComponent(relative).path, encoding: .utf8)
      let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
      for (index, line) in lines.enumerated() {
        guard let name = declaredName(line) else { continue }
        var above = index - 1
        while above >= 0, lines[above].hasPrefix("@") { above -= 1 }  // attributes on their own lines
        var doc: [String] = []
        while above >= 0, lines[above].hasPrefix("///") {
          doc.insert(String(lines[above]), at: 0)
          above -= 1
        }
        declarations.append(Declaration(name: name, path: relative, line: index + 1, doc: doc))
      }
    }
    return declarations.sorted { ($0.path, $0.line) < ($1.path, $1.line) }
  }

  @Test("the scan finds the public types of every library module")
  func scanFindsTypes() throws {
    let declarations = try Self.publicDeclarations()
    let names = Set(declarations.map(\.name))
    for expected in ["Pipeline", "OptionType", "Gate", "Resizer", "PixelLayout", "PipelineBuilder"] {
      #expect(names.contains(expected), "\(expected) not found")
    }
    let modules = Set(declarations.compactMap { $0.path.split(separator: "/").first.map(String.init) })
    #expect(modules.isDisjoint(with: Self.executables))
  }

  @Test("each top-level public type has a doc comment with a code example")
  func everyPublicTypeHasAnExample() throws {
    let missing = try Self.publicDeclarations().filter { declaration in
      !declaration.doc.contains { $0.contains("```") }
    }
    let listed = missing.map { "\($0.name) (Sources/\($0.path):\($0.line))" }.joined(separator: ", ")
    if !missing.isEmpty { Issue.record("public types whose doc comment has no ``` example: \(listed)") }
  }
}
