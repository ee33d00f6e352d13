import Darkroom
import DarkroomCore
import DarkroomHTTPTestServer
import DarkroomTesting
import Foundation
import Testing

@testable import DarkroomCurl

#if canImport(Glibc)
  import Glibc
#endif

/// Bodies written into unnamed files of a directory as they arrive (`HTTPOptions.spoolDirectory`),
/// and saved by linking those files into place.
@Suite("Spooled response bodies", .serialized)
struct SpoolTests {
  /// 1.2 MB that start like a JPEG: several of libcurl's pieces and several staging buffers, with
  /// a last one that is not full.
  static let body: [UInt8] =
    [0xFF, 0xD8, 0xFF, 0xE0] + (0..<1_234_567).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }

  static func folder() throws -> String {
    let path = NSTemporaryDirectory() + "darkroom-spool-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
  }

  static func names(in folder: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
  }

  static func inode(_ path: String) -> UInt64? {
    var status = stat()
    return stat(path, &status) == 0 ? UInt64(status.st_ino) : nil
  }

  @Test("a spooled body stays in an unnamed file; the first save links that file, a second copies it")
  func linkedThenCopied() async throws {
    let server = try await TestHTTPServer.start(routes: ["/big.jpg": .ok(body: Self.body, contentType: "image/jpeg")])
    defer { Task { try? await server.shutdown() } }
    let spool = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: spool) }
    let data = try await HTTPHarness { $0.spoolDirectory = spool }.fetch(server.url("/big.jpg")).get()
    let descriptor = try #require(data.bytes.streamingDescriptor, "the body is in a file, not in memory")
    #expect(Self.names(in: spool).isEmpty, "an unnamed file has no name in the directory")
    #expect(data.bytes.count == Self.body.count)
    #expect(data.bytes.prefix(4) == [0xFF, 0xD8, 0xFF, 0xE0])
    var spooled = stat()
    #expect(fstat(descriptor, &spooled) == 0 && spooled.st_nlink == 0 && spooled.st_size == Self.body.count)

    try AtomicFile.write(data.bytes, named: "sub/first.jpg", in: spool)
    try AtomicFile.write(data.bytes, named: "second.jpg", in: spool)
    let first = try [UInt8](Data(contentsOf: URL(fileURLWithPath: spool + "/sub/first.jpg")))
    let second = try [UInt8](Data(contentsOf: URL(fileURLWithPath: spool + "/second.jpg")))
    #expect(first == Self.body && second == Self.body)
    #expect(Self.inode(spool + "/sub/first.jpg") == UInt64(spooled.st_ino), "the first save is the spooled file itself")
    #expect(Self.inode(spool + "/second.jpg") != UInt64(spooled.st_ino), "a second save is a copy")
    #expect(Self.names(in: spool) == ["second.jpg", "sub"])
    #expect(data.bytes.withUnsafeBytes { Array($0) } == Self.body, "the bytes read back whole")
  }

  @Test("a spooled body replaces a file by a link and a rename; a save to another file system copies it")
  func replaceAndCopy() async throws {
    let server = try await TestHTTPServer.start(routes: ["/big.jpg": .ok(body: Self.body, contentType: "image/jpeg")])
    defer { Task { try? await server.shutdown() } }
    let spool = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: spool) }
    try Data("old".utf8).write(to: URL(fileURLWithPath: spool + "/a.jpg"))
    let data = try await HTTPHarness { $0.spoolDirectory = spool }.fetch(server.url("/big.jpg")).get()
    var spooled = stat()
    #expect(fstat(try #require(data.bytes.streamingDescriptor), &spooled) == 0)
    try AtomicFile.write(data.bytes, named: "a.jpg", in: spool)
    #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: spool + "/a.jpg"))) == Self.body)
    #expect(Self.inode(spool + "/a.jpg") == UInt64(spooled.st_ino), "the replacement is the spooled file itself")
    #expect(Self.names(in: spool) == ["a.jpg"], "no temporary file is left")
    let elsewhere = "/dev/shm/darkroom-spool-" + UUID().uuidString
    guard FileManager.default.fileExists(atPath: "/dev/shm") else { return }
    defer { try? FileManager.default.removeItem(atPath: elsewhere) }
    let other = try await HTTPHarness { $0.spoolDirectory = spool }.fetch(server.url("/big.jpg")).get()
    try AtomicFile.write(other.bytes, named: "b.jpg", in: elsewhere)
    #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: elsewhere + "/b.jpg"))) == Self.body)
    #expect(Self.names(in: spool) == ["a.jpg"])
  }

  @Test("bodies stay in memory where the directory cannot hold unnamed files; limits and errors leave nothing behind")
  func fallbacksAndLimits() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/big.jpg": .ok(body: Self.body, contentType: "image/jpeg"),
      "/gone.jpg": .status(404),
    ])
    defer { Task { try? await server.shutdown() } }
    let spool = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: spool) }
    let missing = try await HTTPHarness { $0.spoolDirectory = spool + "/missing" }.fetch(server.url("/big.jpg")).get()
    #expect(missing.bytes.streamingDescriptor == nil)
    #expect(missing.bytes.withUnsafeBytes { Array($0) } == Self.body)
    let harness = HTTPHarness {
      $0.spoolDirectory = spool
      $0.retries = 0
    }
    #expect(await harness.fetch(server.url("/big.jpg"), maxBytes: 300_000).errorCode == .tooLarge)
    #expect(await harness.fetch(server.url("/gone.jpg")).errorCode == .httpStatus)
    #expect(Self.names(in: spool).isEmpty)
  }

  @Test("spool files take at most their share of the descriptor limit, and every one is closed")
  func descriptorBudget() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/big.jpg": .ok(body: Self.body, contentType: "image/jpeg"),
      "/gone.jpg": .status(404, body: Self.body),
    ])
    defer { Task { try? await server.shutdown() } }
    let spool = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: spool) }
    let before = AtomicFile.openSpoolCount
    var opened: [Int32] = []
    while opened.count < AtomicFile.maxOpenSpools - before {
      let descriptor = AtomicFile.openSpool(in: spool)
      try #require(descriptor >= 0, "spool \(opened.count) of \(AtomicFile.maxOpenSpools)")
      opened.append(descriptor)
    }
    #expect(AtomicFile.openSpool(in: spool) == -1 && errno == EMFILE)
    // With the budget spent, a fetch keeps its body in memory.
    let inMemory = try await HTTPHarness { $0.spoolDirectory = spool }.fetch(server.url("/big.jpg")).get()
    #expect(inMemory.bytes.streamingDescriptor == nil && inMemory.bytes.count == Self.body.count)
    for descriptor in opened { AtomicFile.closeSpool(descriptor) }
    #expect(AtomicFile.openSpoolCount == before)
    do {
      let spooled = try await HTTPHarness { $0.spoolDirectory = spool }.fetch(server.url("/big.jpg")).get()
      #expect(spooled.bytes.streamingDescriptor != nil)
      #expect(AtomicFile.openSpoolCount == before + 1)
    }
    #expect(AtomicFile.openSpoolCount == before, "the spooled bytes closed their file when released")
    // An error page stays in memory: its spool file is closed before the body arrives.
    let harness = HTTPHarness {
      $0.spoolDirectory = spool
      $0.retries = 0
    }
    #expect(await harness.fetch(server.url("/gone.jpg")).errorCode == .httpStatus)
    #expect(AtomicFile.openSpoolCount == before)
    #expect(Self.names(in: spool).isEmpty)
  }

  @Test("a spooled body's first bytes come from memory: sniffing reads nothing back from the file; longer heads read it")
  func headFromMemory() async throws {
    let server = try await TestHTTPServer.start(routes: [
      "/big.jpg": .ok(body: Self.body, contentType: "image/jpeg"),
      "/small.jpg": .ok(body: Array(Self.body.prefix(300)), contentType: "image/jpeg"),
    ])
    defer { Task { try? await server.shutdown() } }
    let spool = try Self.folder()
    defer { try? FileManager.default.removeItem(atPath: spool) }
    let harness = HTTPHarness { $0.spoolDirectory = spool }
    let big = try await harness.fetch(server.url("/big.jpg")).get()
    let small = try await harness.fetch(server.url("/small.jpg")).get()
    #expect(big.bytes.withUnsafeHead(4_000) { Array($0) } == Array(Self.body.prefix(4_000)), "past the kept head: read")
    // The files now read as empty: what still comes back whole came from memory.
    let empty = open("/dev/null", O_RDONLY)
    defer { close(empty) }
    for bytes in [big.bytes, small.bytes] {
      let descriptor = try #require(bytes.streamingDescriptor)
      #expect(dup2(empty, descriptor) == descriptor)
    }
    #expect(big.bytes.prefix(64) == Array(Self.body.prefix(64)))
    #expect(big.bytes.prefix(ImageBytes.keptHeadBytes) == Array(Self.body.prefix(ImageBytes.keptHeadBytes)))
    #expect(big.bytes.withUnsafeHead(4_000) { $0.count } == 0, "a longer head reads the file")
    #expect(small.bytes.prefix(4_000) == Array(Self.body.prefix(300)), "a body shorter than the kept head is all in memory")
    #expect(big.bytes.prefix(0).isEmpty && small.bytes.withUnsafeHead(-1) { $0.count } == 0)
  }
}
