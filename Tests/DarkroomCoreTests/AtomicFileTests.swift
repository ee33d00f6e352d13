import DarkroomCore
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `AtomicFile` writes a new file unnamed first (`O_TMPFILE`, then a link) and a file it replaces
/// through a named temporary file and a rename; both leave only the file, whole.
@Suite("Atomic file writes, unnamed and named", .serialized)
struct AtomicFileTests {
  func folder() throws -> String {
    let path = NSTemporaryDirectory() + "darkroom-atomic-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }

  func contents(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

  /// What a folder holds, hidden files included (a temporary file left behind would show here).
  func listing(_ path: String) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: path).sorted() }

  @Test("new files, replaced files and refused files, by either path", arguments: [true, false])
  func writes(unnamed: Bool) throws {
    AtomicFile.unnamedFiles.withLock { $0 = unnamed }
    defer { AtomicFile.unnamedFiles.withLock { $0 = true } }
    let root = try folder()
    defer { try? FileManager.default.removeItem(atPath: root) }
    let large = ImageBytes(Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }))
    try AtomicFile.write(large, named: "a/b/large.bin", in: root)
    #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/a/b/large.bin")) == large.data)
    try AtomicFile.write(ImageBytes(Data("one".utf8)), named: "x.jpg", in: root)
    try AtomicFile.write(ImageBytes(Data("two".utf8)), named: "x.jpg", in: root)
    #expect(try contents(root + "/x.jpg") == "two")
    var attributes = try FileManager.default.attributesOfItem(atPath: root + "/x.jpg")
    #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o644 } == 0o644)
    attributes = try FileManager.default.attributesOfItem(atPath: root + "/a/b/large.bin")
    #expect(attributes[.type] as? FileAttributeType == .typeRegular)
    // Without overwrite an existing name is refused, a symlink of that name too, and nothing
    // is followed or replaced.
    #expect(throws: NSError.self) {
      try AtomicFile.write(ImageBytes(Data("three".utf8)), named: "x.jpg", in: root, overwrite: false)
    }
    #expect(try contents(root + "/x.jpg") == "two")
    try "outside".write(toFile: root + "/target.txt", atomically: false, encoding: .utf8)
    try FileManager.default.createSymbolicLink(atPath: root + "/link.jpg", withDestinationPath: root + "/target.txt")
    #expect(throws: NSError.self) {
      try AtomicFile.write(ImageBytes(Data("four".utf8)), named: "link.jpg", in: root, overwrite: false)
    }
    #expect(try contents(root + "/target.txt") == "outside")
    // Overwriting a symlink replaces the link itself, never what it points at.
    try AtomicFile.write(ImageBytes(Data("five".utf8)), named: "link.jpg", in: root)
    #expect(try contents(root + "/target.txt") == "outside")
    let replaced = try FileManager.default.attributesOfItem(atPath: root + "/link.jpg")
    #expect(replaced[.type] as? FileAttributeType == .typeRegular)
    #expect(try contents(root + "/link.jpg") == "five")
    #expect(try listing(root) == ["a", "link.jpg", "target.txt", "x.jpg"])
    #expect(try listing(root + "/a/b") == ["large.bin"])
  }

  @Test("a folder of the name that is a file fails the write and leaves nothing")
  func folderThatIsAFile() throws {
    let root = try folder()
    defer { try? FileManager.default.removeItem(atPath: root) }
    try "file".write(toFile: root + "/plain", atomically: false, encoding: .utf8)
    #expect(throws: NSError.self) { try AtomicFile.write(ImageBytes(Data("x".utf8)), named: "plain/x.jpg", in: root) }
    #expect(try listing(root) == ["plain"])
  }

  @Test("a template with a NUL is refused: the system would end every name there")
  func nulInTemplate() {
    #expect(Writer.problems(in: "x\u{0}{name}.jpg").contains { $0.contains("NUL") })
    #expect(Writer.problems(in: "{name}.jpg").isEmpty)
  }
}
