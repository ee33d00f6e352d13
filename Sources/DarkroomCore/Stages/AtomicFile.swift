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
    if let long = path.split(separator: "/").first(where: { $0.utf8.count > maxNameBytes }) {
      throw NSError(
        domain: NSPOSIXErrorDomain, code: Int(ENAMETOOLONG),
        userInfo: [
          NSLocalizedDescriptionKey:
            "the name \"\(long.prefix(40))…\" is \(long.utf8.count) bytes, over the file system's limit of \(maxNameBytes): "
            + "shorten the input's name or the template"
        ])
    }
    // A short temporary name: one built from the target's name would pass the file system's
    // 255-byte limit before the target does.
    let temporary = (folder.isEmpty ? "" : folder + "/") + ".darkroom-\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
    var descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    if descriptor < 0, errno == ENOENT, !folder.isEmpty {
      // Missing directories are created on demand, not checked before every file.
      try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
      descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    }
    guard descriptor >= 0 else { throw posixError("cannot create \(temporary)") }
    inProgress.withLock { _ = $0.insert(temporary) }
    defer { inProgress.withLock { _ = $0.remove(temporary) } }
    var written = 0
    var failure: Int32 = 0  // the errno of the first failing write or close
    bytes.withUnsafeBytes { buffer in
      while written < buffer.count, let base = buffer.baseAddress {
        let count = Glibc.write(descriptor, base + written, buffer.count - written)
        if count < 0 {
          if errno == EINTR { continue }
          failure = errno
          return
        }
        written += count
      }
    }
    if close(descriptor) != 0, failure == 0 { failure = errno }
    if failure != 0 {
      unlink(temporary)
      throw posixError("", code: failure)  // the caller names the file: "cannot write …: No space left on device"
    }
    guard rename(temporary, path) == 0 else {
      let error = posixError("cannot move the written file to \(path)")
      unlink(temporary)
      throw error
    }
  }

  /// The longest file name (one path component) Linux file systems take, in bytes (NAME_MAX).
  public static let maxNameBytes = 255

  /// An error carrying `errno`, described as "message: reason" (or just the reason).
  private static func posixError(_ message: String, code: Int32 = errno) -> NSError {
    let reason = String(cString: strerror(code))
    return NSError(
      domain: NSPOSIXErrorDomain, code: Int(code),
      userInfo: [NSLocalizedDescriptionKey: message.isEmpty ? reason : "\(message): \(reason)"])
  }
}
