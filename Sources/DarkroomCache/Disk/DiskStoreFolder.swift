import Crypto
import DarkroomCore
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The disk store's folder, reached only through directory descriptors.
///
/// The store directory is opened once and kept open; `entries`, the two-hex-digit folders and the
/// entry files are opened beneath it with `openat` and `O_NOFOLLOW` (folders also `O_DIRECTORY`,
/// files `O_NONBLOCK`), and names are removed with `unlinkat` relative to their folder. So no path
/// ever leaves the folder through a symlink, and an entry's name comes from its key
/// (`entries/ab/<sha256 of key>`), never from the index. A symlink, a FIFO, a device or a folder
/// where an entry or one of the store's folders should be is removed (never followed, never read).
final class DiskStoreFolder: Sendable {
  /// The store directory, open for the folder's lifetime.
  let descriptor: Int32
  let path: String

  /// Opens `path` (the store directory: a symlink there is the user's choice and is followed) and
  /// makes sure `entries` and `tmp` are real folders beneath it.
  init(path: String) throws {
    self.path = path
    descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard descriptor >= 0 else { throw DiskEntryFile.failure("cannot open the disk cache directory \(path)") }
    for name in ["entries", "tmp"] {
      let folder = Self.openFolder(in: descriptor, name, create: true)
      // On failure deinit closes `descriptor` (every stored property is set): closing it here
      // too would close whatever another thread opened next under the same number.
      guard folder >= 0 else { throw DiskEntryFile.failure("cannot create \(path)/\(name)") }
      close(folder)
    }
  }

  deinit { close(descriptor) }

  /// An entry's name: the SHA-256 of its key in lowercase hex, in the folder named by its first
  /// two digits.
  struct EntryName: Hashable, Sendable {
    let folder: String
    let file: String

    init(key: String) {
      var hex = [UInt8](repeating: 0, count: 64)
      for (index, byte) in SHA256.hash(data: Data(key.utf8)).enumerated() {
        hex[2 * index] = Self.digits[Int(byte >> 4)]
        hex[2 * index + 1] = Self.digits[Int(byte & 0x0F)]
      }
      file = String(decoding: hex, as: UTF8.self)
      folder = String(decoding: hex[0..<2], as: UTF8.self)
    }

    var relativePath: String { "entries/\(folder)/\(file)" }

    private static let digits = Array("0123456789abcdef".utf8)

    /// True for a name the store could have made: 64 lowercase hex digits, in the folder of its
    /// first two.
    static func isEntry(_ name: String, in folder: String) -> Bool {
      name.utf8.count == 64 && name.utf8.allSatisfy(isHexDigit) && name.hasPrefix(folder) && isFolder(folder)
    }

    static func isFolder(_ name: String) -> Bool { name.utf8.count == 2 && name.utf8.allSatisfy(isHexDigit) }

    private static func isHexDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte) }
  }

  /// What is found where an entry should be.
  enum Lookup {
    /// Nothing (or an `entries` or two-digit folder that is not a real folder).
    case missing
    /// Something that is not a regular file, or that cannot be opened for reading; nothing was
    /// read from it.
    case notRegular
    /// A regular file, open for reading (the caller closes it), and its size.
    case file(descriptor: Int32, size: Int)
  }

  /// Opens the entry file named by `name` for reading, never following a symlink and never
  /// blocking on a FIFO or device.
  func openEntry(_ name: EntryName) throws -> Lookup {
    let entries = Self.openFolder(in: descriptor, "entries", create: false, repair: false)
    guard entries >= 0 else { return .missing }
    defer { close(entries) }
    let folder = Self.openFolder(in: entries, name.folder, create: false, repair: false)
    guard folder >= 0 else { return .missing }
    defer { close(folder) }
    let file = openat(folder, name.file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
    guard file >= 0 else {
      switch errno {
      case ENOENT: return .missing
      // A symlink, a socket, a file planted unreadable: a miss to remove, not a failed operation.
      case ELOOP, ENXIO, ENOTDIR, ENODEV, EACCES, EPERM: return .notRegular
      default: throw DiskEntryFile.failure("cannot open \(path)/\(name.relativePath)")
      }
    }
    var status = stat()
    guard fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_size >= 0 else {
      close(file)
      return .notRegular
    }
    return .file(descriptor: file, size: Int(status.st_size))
  }

  /// Removes whatever is at `name` (a file, a symlink, a FIFO, an empty folder: never followed);
  /// also removes an `entries` or two-digit folder that is not a real folder.
  func removeEntry(_ name: EntryName) {
    let entries = Self.openFolder(in: descriptor, "entries", create: false)
    guard entries >= 0 else { return }
    defer { close(entries) }
    let folder = Self.openFolder(in: entries, name.folder, create: false)
    guard folder >= 0 else { return }
    defer { close(folder) }
    Self.removeName(name.file, in: folder)
  }

  /// Moves the temporary file `temporary` (in `tmp`) to the entry `name` and syncs its folder.
  func install(temporary: String, as name: EntryName) throws {
    let tmp = Self.openFolder(in: descriptor, "tmp", create: true)
    guard tmp >= 0 else { throw DiskEntryFile.failure("cannot open \(path)/tmp") }
    defer { close(tmp) }
    let entries = Self.openFolder(in: descriptor, "entries", create: true)
    guard entries >= 0 else { throw DiskEntryFile.failure("cannot create \(path)/entries") }
    defer { close(entries) }
    let folder = Self.openFolder(in: entries, name.folder, create: true)
    guard folder >= 0 else { throw DiskEntryFile.failure("cannot create \(path)/entries/\(name.folder)") }
    defer { close(folder) }
    if renameat(tmp, temporary, folder, name.file) != 0 {
      // A folder planted where the entry goes: an empty one is removed, then the move is tried again.
      guard errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST, unlinkat(folder, name.file, AT_REMOVEDIR) == 0,
        renameat(tmp, temporary, folder, name.file) == 0
      else { throw DiskEntryFile.failure("cannot move an entry into \(path)/entries/\(name.folder)") }
    }
    fsync(folder)
  }

  /// Creates a new temporary file in `tmp`; returns its name and an open descriptor.
  func createTemporary() throws -> (name: String, descriptor: Int32) {
    let tmp = Self.openFolder(in: descriptor, "tmp", create: true)
    guard tmp >= 0 else { throw DiskEntryFile.failure("cannot open \(path)/tmp") }
    defer { close(tmp) }
    let name = UUID().uuidString + ".partial"
    let file = openat(tmp, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
    guard file >= 0 else { throw DiskEntryFile.failure("cannot create \(path)/tmp/\(name)") }
    return (name, file)
  }

  /// Removes a temporary file made by ``createTemporary()``.
  func removeTemporary(_ name: String) {
    let tmp = Self.openFolder(in: descriptor, "tmp", create: false)
    guard tmp >= 0 else { return }
    unlinkat(tmp, name, 0)
    close(tmp)
  }

  /// Removes the temporary files (`*.partial` in `tmp`) at least `age` seconds old; returns how
  /// many went.
  func removeTemporaries(olderThan age: TimeInterval) -> Int {
    let tmp = Self.openFolder(in: descriptor, "tmp", create: false)
    guard tmp >= 0 else { return 0 }
    defer { close(tmp) }
    let now = Date().timeIntervalSince1970
    var removed = 0
    for name in Self.names(in: tmp) where name.hasSuffix(".partial") && !name.hasPrefix(".") {
      var status = stat()
      guard fstatat(tmp, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
      let modified = Double(status.st_mtim.tv_sec)
      if now - modified >= age, Self.removeName(name, in: tmp) { removed += 1 }
    }
    return removed
  }

  /// Removes every entry-named file for which `remove` is true (and, uncounted, anything but a
  /// folder named like a two-digit folder); names the store could not have made are left alone.
  /// Returns how many files went.
  func removeEntries(where remove: (EntryName) -> Bool) -> Int {
    let entries = Self.openFolder(in: descriptor, "entries", create: true)
    guard entries >= 0 else { return 0 }
    defer { close(entries) }
    var removed = 0
    for folderName in Self.names(in: entries) where EntryName.isFolder(folderName) {
      let folder = Self.openFolder(in: entries, folderName, create: false)
      guard folder >= 0 else { continue }  // an impostor (now removed) or gone
      defer { close(folder) }
      for name in Self.names(in: folder) where EntryName.isEntry(name, in: folderName) {
        if remove(EntryName(folder: folderName, file: name)), Self.removeName(name, in: folder) { removed += 1 }
      }
    }
    return removed
  }

  // MARK: - Descriptor helpers

  /// Opens the folder `name` in `parent` without following a symlink. With `repair`, something
  /// that is not a folder there (a symlink, a file, a FIFO) is removed; with `create`, a missing
  /// folder is made. Returns -1 when there is no usable folder.
  static func openFolder(in parent: Int32, _ name: String, create: Bool, repair: Bool = true) -> Int32 {
    let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
    for _ in 0..<3 {
      let folder = openat(parent, name, flags)
      if folder >= 0 { return folder }
      switch errno {
      case ENOENT:
        guard create, mkdirat(parent, name, 0o755) == 0 || errno == EEXIST else { return -1 }
      case ELOOP, ENOTDIR:
        guard repair, unlinkat(parent, name, 0) == 0 || errno == ENOENT else { return -1 }
        guard create else { return -1 }
      case EINTR: continue
      default: return -1
      }
    }
    return -1
  }

  /// Removes the name `name` in `folder` (an empty folder too); never follows it.
  @discardableResult
  static func removeName(_ name: String, in folder: Int32) -> Bool {
    if unlinkat(folder, name, 0) == 0 { return true }
    return errno == EISDIR && unlinkat(folder, name, AT_REMOVEDIR) == 0
  }

  /// The names in the folder open at `descriptor` (not `.` and `..`).
  static func names(in descriptor: Int32) -> [String] {
    let copy = dup(descriptor)
    guard copy >= 0 else { return [] }
    guard let stream = fdopendir(copy) else {
      close(copy)
      return []
    }
    defer { closedir(stream) }
    rewinddir(stream)
    var names: [String] = []
    while let entry = readdir(stream) {
      let name = withUnsafePointer(to: entry.pointee.d_name) {
        $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
      }
      if name != "." && name != ".." { names.append(name) }
    }
    return names
  }
}

extension DiskStoreFolder.EntryName {
  init(folder: String, file: String) {
    self.folder = folder
    self.file = file
  }
}
