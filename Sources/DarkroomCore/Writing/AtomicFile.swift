import CFileShim
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Writes a file so that it appears whole or not at all: the bytes go to a temporary file in the
/// same directory, which is then renamed over the target (rename is atomic within a directory).
///
/// The file is written *beneath* its output directory: the folders of a relative name are opened
/// (or created) one at a time from a descriptor of the directory, following no symbolic link, and
/// the temporary file and the rename use the last folder's descriptor. A folder inside the output
/// directory that someone replaces with a symlink therefore fails the write instead of sending it
/// elsewhere. The output directory itself (and the folders above it) is trusted.
///
/// No `fsync`: outputs are not durable across a power cut, which is the trade-off every image
/// tool makes for speed (Foundation's atomic write syncs, and cost ~15 ms per file here). Caches
/// that must survive crashes sync themselves.
///
/// ```swift
/// try AtomicFile.write(bytes, named: "thumbs/a.jpg", in: "out")
/// try AtomicFile.write(bytes, to: "out/a.jpg")
/// ```
package enum AtomicFile {
  /// Writes `bytes` to `path`, creating missing directories: the last component is written
  /// beneath the folder of `path` (see ``write(_:named:in:overwrite:)``).
  public static func write(_ bytes: ImageBytes, to path: String) throws {
    let folder = (path as NSString).deletingLastPathComponent
    try write(bytes, named: (path as NSString).lastPathComponent, in: folder.isEmpty ? "." : folder)
  }

  /// Writes `bytes` to the relative `name` inside `directory`, creating `directory` and the
  /// folders of `name` when missing, and following no symbolic link below `directory`.
  ///
  /// `name` may not be absolute or contain `..`. With `overwrite` off, an existing file (or
  /// symlink) of that name fails with `EEXIST`. Errors are `NSError`s in `NSPOSIXErrorDomain`
  /// whose description names the file: "cannot create out/.a.jpg.123.tmp: Read-only file system".
  public static func write(_ bytes: ImageBytes, named name: String, in directory: String, overwrite: Bool = true) throws {
    let components = name.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }.map(String.init)
    guard !name.hasPrefix("/"), !components.contains(".."), let last = components.last else {
      throw posixError("cannot write \(name): the name must stay inside \(directory)", code: EINVAL)
    }
    if let long = components.first(where: { $0.utf8.count > maxNameBytes }) {
      throw posixError(
        "the name \"\(long.prefix(40))…\" is \(long.utf8.count) bytes, over the file system's limit of \(maxNameBytes): "
          + "shorten the input's name or the template", code: ENAMETOOLONG, withReason: false)
    }
    let directory = directory.isEmpty ? "." : directory
    var folder = open(directory, O_RDONLY | O_CLOEXEC | O_DIRECTORY | DR_O_PATH)
    if folder < 0, errno == ENOENT {
      // Missing directories are created on demand, not checked before every file.
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
      folder = open(directory, O_RDONLY | O_CLOEXEC | O_DIRECTORY | DR_O_PATH)
    }
    guard folder >= 0 else { throw posixError("cannot open the output directory \(directory)") }
    defer { close(folder) }
    var shown = directory
    for component in components.dropLast() {
      shown += "/" + component
      let flags = O_RDONLY | O_CLOEXEC | O_DIRECTORY | DR_O_PATH
      var next = FileTransport.openBeneath(folder, component, flags: flags)
      if next < 0, errno == ENOENT {
        guard mkdirat(folder, component, 0o755) == 0 || errno == EEXIST else { throw posixError("cannot create \(shown)") }
        next = FileTransport.openBeneath(folder, component, flags: flags)
      }
      guard next >= 0 else {
        if errno == ELOOP || errno == EXDEV {
          throw posixError("cannot write into \(shown): it is a symbolic link, and outputs never follow one")
        }
        throw posixError("cannot open \(shown)")
      }
      close(folder)
      folder = next
    }
    let path = shown + "/" + last
    if !overwrite {
      var status = stat()
      if fstatat(folder, last, &status, AT_SYMLINK_NOFOLLOW) == 0 { throw posixError("\(path) exists", code: EEXIST) }
    }
    // A short temporary name: one built from the target's name would pass the file system's
    // 255-byte limit before the target does.
    let temporary = ".darkroom-\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
    let descriptor = openat(folder, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
    guard descriptor >= 0 else { throw posixError("cannot create \(shown)/\(temporary)") }
    // Known to a process stopping early (``removeTemporaries()``), by the path it was made under.
    let registered = shown + "/" + temporary
    inProgress.withLock { _ = $0.insert(registered) }
    defer { inProgress.withLock { _ = $0.remove(registered) } }
    // The errno of the first failing write or close.
    var failure = bytes.withUnsafeBytes { DescriptorIO.writeAll(descriptor, $0) } ?? 0
    if close(descriptor) != 0, failure == 0 { failure = errno }
    if failure != 0 {
      unlinkat(folder, temporary, 0)
      throw posixError("", code: failure)  // the caller names the file: "cannot write …: No space left on device"
    }
    guard renameat(folder, temporary, folder, last) == 0 else {
      let error = posixError("cannot move the written file to \(path)")
      unlinkat(folder, temporary, 0)
      throw error
    }
  }

  /// The longest file name (one path component) Linux file systems take, in bytes (NAME_MAX).
  public static let maxNameBytes = 255

  /// An error carrying `errno`, described as "message: reason" (or just the reason, or just the
  /// message when it says everything).
  private static func posixError(_ message: String, code: Int32 = errno, withReason: Bool = true) -> NSError {
    let reason = String(cString: strerror(code))
    let text = message.isEmpty ? reason : withReason ? "\(message): \(reason)" : message
    return NSError(domain: NSPOSIXErrorDomain, code: Int(code), userInfo: [NSLocalizedDescriptionKey: text])
  }
}
