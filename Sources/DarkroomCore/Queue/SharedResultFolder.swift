import CFileShim
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A folder every machine of a cluster mounts, where a queue keeps the results too large for its
/// database: each file named by the SHA-256 of its bytes (`objects/3f/3f9c…`).
///
/// Content addressing makes a write safe to repeat and to race: two workers that made the same
/// output (one of them fenced) write the same bytes to the same name, each atomically. A result
/// is written before its job is marked done, so a done job's file is always there; one written
/// for an attempt that was then fenced is an orphan with the same bytes as the winner's. Files are
/// read beneath the folder, never through a symbolic link, at most ``maxBytes`` of them, and
/// checked against their name.
///
/// ```swift
/// let folder = SharedResultFolder(path: "/mnt/darkroom")
/// let digest = try folder.write(bytes)   // objects/3f/3f9c…
/// let same = try folder.read(digest, expectedBytes: bytes.count)
/// ```
package struct SharedResultFolder: Sendable {
  package var path: String
  /// The largest file read back.
  package static let maxBytes = 1 << 31

  package init(path: String) { self.path = path }

  /// The file name of the result whose SHA-256 is `digest` (64 hex digits), inside the folder.
  package static func name(of digest: String) -> String { "objects/\(digest.prefix(2))/\(digest)" }

  /// Writes `bytes` under their SHA-256 (kept when already there); returns the digest.
  @discardableResult
  package func write(_ bytes: [UInt8]) throws(PipelineError) -> String {
    let digest = RequestDigest.hex(of: bytes)
    do {
      try AtomicFile.write(ImageBytes(bytes), named: Self.name(of: digest), in: path)
    } catch {
      throw PipelineError(.writeFailed, "cannot write a result into the shared folder \(path): \(error.localizedDescription)")
    }
    return digest
  }

  /// The bytes of the result whose SHA-256 is `digest`, checked: `cacheCorrupt` when the file
  /// is not `expectedBytes` long or its bytes do not hash to `digest`, `notFound` when it is missing.
  package func read(_ digest: String, expectedBytes: Int) throws(PipelineError) -> [UInt8] {
    guard digest.utf8.count == 64, digest.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
      throw PipelineError(.cacheCorrupt, "a result's checksum is not a SHA-256: \(digest.prefix(80))")
    }
    guard (0...Self.maxBytes).contains(expectedBytes) else {
      throw PipelineError(.cacheCorrupt, "a result's size is out of range: \(expectedBytes) bytes")
    }
    let folder = open(path, O_RDONLY | O_CLOEXEC | O_DIRECTORY | DR_O_PATH)
    guard folder >= 0 else {
      throw PipelineError(.notFound, "cannot open the shared result folder \(path): \(String(cString: strerror(errno)))")
    }
    defer { close(folder) }
    let name = Self.name(of: digest)
    let file = FileTransport.openBeneath(folder, name, flags: O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard file >= 0 else {
      let reason = errno == ELOOP || errno == EXDEV ? "it is a symbolic link" : String(cString: strerror(errno))
      throw PipelineError(.notFound, "cannot read the result \(path)/\(name): \(reason)")
    }
    defer { close(file) }
    var status = stat()
    guard fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
      throw PipelineError(.cacheCorrupt, "the result \(path)/\(name) is not a regular file")
    }
    _ = fcntl(file, F_SETFL, fcntl(file, F_GETFL) & ~O_NONBLOCK)
    let data: Data
    do {
      data = try BoundedFileReader.read(descriptor: file, limit: expectedBytes)
    } catch {
      throw PipelineError(.cacheCorrupt, "the result \(path)/\(name) is longer than its recorded \(expectedBytes) bytes")
    }
    let bytes = [UInt8](data)
    guard bytes.count == expectedBytes, RequestDigest.hex(of: bytes) == digest else {
      throw PipelineError(.cacheCorrupt, "the result \(path)/\(name) does not match its checksum")
    }
    return bytes
  }
}
