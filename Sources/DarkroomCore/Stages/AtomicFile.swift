import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Writes a file so that it appears whole or not at all: the bytes go to a temporary file in the
/// same directory, which is then renamed over the target (rename is atomic within a directory).
///
/// No `fsync`: outputs are not durable across a power cut, which is the trade-off every image
/// tool makes for speed (Foundation's atomic write syncs, and cost ~15 ms per file here). Caches
/// that must survive crashes sync themselves.
///
/// ```swift
/// try AtomicFile.write(bytes, to: "out/a.jpg")
/// ```
public enum AtomicFile {
  /// Writes `bytes` to `path`, creating missing directories.
  public static func write(_ bytes: ImageBytes, to path: String) throws {
    let folder = (path as NSString).deletingLastPathComponent
    let name = (path as NSString).lastPathComponent
    let temporary = (folder.isEmpty ? "" : folder + "/") + ".\(name).\(UInt32.random(in: 0...UInt32.max)).tmp"
    var descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    if descriptor < 0, errno == ENOENT, !folder.isEmpty {
      // Missing directories are created on demand, not checked before every file.
      try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
      descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    }
    guard descriptor >= 0 else { throw posixError("cannot create \(temporary)") }
    var written = 0
    let failure: String? = bytes.withUnsafeBytes { buffer -> String? in
      while written < buffer.count {
        let count = Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
        if count < 0 {
          if errno == EINTR { continue }
          return "cannot write \(path)"
        }
        written += count
      }
      return nil
    }
    let closed = close(descriptor)
    if let failure {
      unlink(temporary)
      throw posixError(failure)
    }
    if closed != 0 {
      unlink(temporary)
      throw posixError("cannot write \(path)")
    }
    guard rename(temporary, path) == 0 else {
      let error = posixError("cannot move the written file to \(path)")
      unlink(temporary)
      throw error
    }
  }

  private static func posixError(_ message: String) -> NSError {
    NSError(
      domain: NSPOSIXErrorDomain, code: Int(errno),
      userInfo: [NSLocalizedDescriptionKey: "\(message): \(String(cString: strerror(errno)))"])
  }
}
