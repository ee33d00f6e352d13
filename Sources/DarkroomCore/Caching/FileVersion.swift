import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// What says which version of a local file a cache entry was made from: its device and inode,
/// its size, and its modification and change times to the nanosecond. A file edited in place, or
/// replaced by another, has another version; the change time cannot be set back by a user.
///
/// Chosen over a hash of the content: a `stat(2)` reads no bytes, while hashing would read every
/// byte of a large file on every cache hit, the very work a hit saves.
struct FileVersion: Sendable, CustomStringConvertible {
  var device: UInt64
  var inode: UInt64
  var size: Int64
  var modified: (seconds: Int, nanoseconds: Int)
  var changed: (seconds: Int, nanoseconds: Int)

  /// The version of the file at `path` (symlinks followed, as the fetch does), or `nil` when it
  /// cannot be inspected.
  init?(path: String) {
    var status = stat()
    guard stat(path, &status) == 0 else { return nil }
    device = UInt64(status.st_dev)
    inode = UInt64(status.st_ino)
    size = Int64(status.st_size)
    modified = (Int(status.st_mtim.tv_sec), Int(status.st_mtim.tv_nsec))
    changed = (Int(status.st_ctim.tv_sec), Int(status.st_ctim.tv_nsec))
  }

  /// Threads for the `stat` and `realpath` of cache lookups: their own, so that a cache hit never
  /// waits behind the decodes that fill the CPU pool (a hit is answered before any stage runs).
  static let lookupPool = BlockingPool(threads: 2, name: "darkroom.file-version")

  var description: String {
    "\(device):\(inode):\(size):\(modified.seconds).\(modified.nanoseconds):\(changed.seconds).\(changed.nanoseconds)"
  }
}
