import CFileShim
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Writes a file so that it appears whole or not at all: the bytes go to an unnamed file in the
/// same directory (`O_TMPFILE`) that is linked in under its name once written, or, to replace a
/// file or where the file system has no unnamed files, to a temporary file that is then renamed
/// over the target (rename is atomic within a directory).
///
/// The file is written *beneath* its output directory: the folders of a relative name are opened
/// (or created) one at a time from a descriptor of the directory, following no symbolic link, and
/// the file and its link or rename use the last folder's descriptor. A folder inside the output
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
    let folder = PathText.folder(path)
    try write(bytes, named: PathText.lastComponent(path), in: folder.isEmpty ? "." : folder)
  }

  /// Writes `bytes` to the relative `name` inside `directory`, creating `directory` and the
  /// folders of `name` when missing, and following no symbolic link below `directory`.
  ///
  /// `name` may not be absolute or contain `..`. With `overwrite` off, an existing file (or
  /// symlink) of that name fails with `EEXIST`. Errors are `NSError`s in `NSPOSIXErrorDomain`
  /// whose description names the file: "cannot create out/.a.jpg.123.tmp: Read-only file system".
  /// `commit` is asked just before the written bytes get their name (the link or the rename):
  /// when it says no (the run was stopped, ``CommitPoint``), nothing is left behind and the write
  /// fails with `ECANCELED`.
  public static func write(
    _ bytes: ImageBytes, named name: String, in directory: String, overwrite: Bool = true, commit: () -> Bool = { true }
  ) throws {
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
    var status = stat()
    let exists = fstatat(folder, last, &status, AT_SYMLINK_NOFOLLOW) == 0
    if exists, !overwrite { throw posixError("\(path) exists", code: EEXIST) }
    // A fetched body already in an unnamed file of this file system is linked in as it is.
    if !exists, let spooled = bytes.takeSpooledFile(),
      try linkSpooled(spooled, count: bytes.count, in: folder, as: last, overwrite: overwrite, path: path, commit: commit)
    {
      return
    }
    // A new file is linked in whole; one to replace is renamed over (a link cannot replace).
    if !exists, unnamedFiles.withLock({ $0 }),
      try writeUnnamed(bytes, in: folder, as: last, overwrite: overwrite, path: path, commit: commit)
    {
      return
    }
    // A short temporary name: one built from the target's name would pass the file system's
    // 255-byte limit before the target does.
    let temporary = ".darkroom-\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
    // Known to a process stopping early (``removeTemporaries()``), by the path it was made under.
    let registered = shown + "/" + temporary
    defer { inProgress.withLock { _ = $0.paths.remove(registered) } }
    // A spooled body that replaces a file gets the temporary name by a link: nothing is copied.
    if let spooled = bytes.takeSpooledFile(),
      linkTemporary(spooled, count: bytes.count, as: temporary, in: folder, registered: registered)
    {
      return try rename(temporary, to: last, in: folder, path: path, commit: commit)
    }
    let (descriptor, failed) = createTemporary(temporary, in: folder, registered: registered)
    guard descriptor >= 0 else {
      if failed == ECANCELED { throw stopped(path) }
      throw posixError("cannot create \(shown)/\(temporary)", code: failed)
    }
    // The errno of the first failing write or close.
    var failure = bytes.withUnsafeBytes { DescriptorIO.writeAll(descriptor, $0) } ?? 0
    if close(descriptor) != 0, failure == 0 { failure = errno }
    if failure != 0 {
      unlinkat(folder, temporary, 0)
      throw posixError("", code: failure)  // the caller names the file: "cannot write …: No space left on device"
    }
    try rename(temporary, to: last, in: folder, path: path, commit: commit)
  }

  /// Renames the written `temporary` over `last` if `commit` still says yes; removes it otherwise.
  private static func rename(_ temporary: String, to last: String, in folder: Int32, path: String, commit: () -> Bool)
    throws
  {
    guard commit() else {
      unlinkat(folder, temporary, 0)
      throw stopped(path)
    }
    guard renameat(folder, temporary, folder, last) == 0 else {
      let error = posixError("cannot move the written file to \(path)")
      unlinkat(folder, temporary, 0)
      throw error
    }
  }

  /// Whether new files are written unnamed first (``writeUnnamed(_:in:as:overwrite:path:)``);
  /// tests turn it off to reach the named temporary file on a file system that has both.
  package static let unnamedFiles = Protected(true)

  /// Writes `bytes` into an unnamed file in `folder` (`O_TMPFILE`) and links it in as `last`
  /// once whole: one change to the directory instead of two (a named temporary file, then the
  /// rename), and nothing left behind by a process that dies mid-write. On a journal-less ext4
  /// after many deletions, creating named files is what costs (Docs/Performance.md, Caches):
  /// 50 files took 18–22 ms this way against 25–44 ms. Returns false, having left nothing behind,
  /// where the file system has no unnamed files (NFS, FUSE), where `/proc` is not mounted (the
  /// link goes through `/proc/self/fd`: linking a descriptor directly needs
  /// `CAP_DAC_READ_SEARCH`), and where `last` exists and is to be overwritten (a link cannot
  /// replace a file: the rename does). A `last` that exists without `overwrite` is `EEXIST`.
  /// After the link the name must be this very file (a `/proc` that is not procfs could link
  /// another): otherwise that link is taken back and the named path used. A write stopped by
  /// ``removeTemporaries()`` is never linked in, or is taken back when the stop came during its
  /// link; only this very file is ever removed.
  private static func writeUnnamed(
    _ bytes: ImageBytes, in folder: Int32, as last: String, overwrite: Bool, path: String, commit: () -> Bool
  ) throws -> Bool {
    let descriptor = dr_open_unnamed(folder, 0o644)
    guard descriptor >= 0 else { return false }
    let number = beginUnnamed()
    defer { endUnnamed(number) }
    if let failure = bytes.withUnsafeBytes({ DescriptorIO.writeAll(descriptor, $0) }) {
      close(descriptor)
      throw posixError("", code: failure)  // the caller names the file
    }
    var written = stat()
    guard fstat(descriptor, &written) == 0, !isStopped(number), commit() else {
      close(descriptor)
      throw stopped(path)
    }
    let linked = link(descriptor, written, in: folder, as: last)
    guard case .linked = linked else {
      close(descriptor)
      if case .failed(EEXIST) = linked, !overwrite { throw posixError("\(path) exists", code: EEXIST) }
      return false
    }
    // A stop during the link takes the file back, as it removes a temporary file before its
    // rename. Where unnamed files exist (local file systems), close reports no write-back error;
    // if it ever does, the linked file is taken back too. Only this very file is ever removed.
    let closed = close(descriptor) == 0 ? 0 : errno
    if isStopped(number) || closed != 0 {
      if namesFile(folder, last, written) { unlinkat(folder, last, 0) }
      if closed != 0 { throw posixError("", code: closed) }
      throw stopped(path)
    }
    return true
  }

  /// Links the unnamed file of a spooled body (``ImageBytes/init(spooledFile:count:)``) in as
  /// `last`: its bytes are already written, so none is copied. Returns false, having linked
  /// nothing, where that cannot be done (another file system, no `/proc`, a descriptor that is not
  /// an unnamed regular file of `count` bytes); the caller then writes the bytes as usual. The
  /// checks after the link and on a stop are ``writeUnnamed(_:in:as:overwrite:path:commit:)``'s.
  private static func linkSpooled(
    _ descriptor: Int32, count: Int, in folder: Int32, as last: String, overwrite: Bool, path: String, commit: () -> Bool
  ) throws -> Bool {
    guard let spooled = linkableSpool(descriptor, count: count, in: folder) else { return false }
    let number = beginUnnamed()
    defer { endUnnamed(number) }
    guard !isStopped(number), commit() else { throw stopped(path) }
    let linked = link(descriptor, spooled, in: folder, as: last)
    guard case .linked = linked else {
      if case .failed(EEXIST) = linked, !overwrite { throw posixError("\(path) exists", code: EEXIST) }
      return false
    }
    if isStopped(number) {
      if namesFile(folder, last, spooled) { unlinkat(folder, last, 0) }
      throw stopped(path)
    }
    return true
  }

  /// Opens an unnamed file in `directory` (`O_TMPFILE`, for reading and writing) to hold a body
  /// as it arrives: a later ``write(_:named:in:overwrite:commit:)`` of its
  /// ``ImageBytes/init(spooledFile:count:)`` links it in. The descriptor (to be closed with
  /// ``closeSpool(_:)``, or by the `ImageBytes` made on it), or -1 with `errno` set: `EMFILE`
  /// when ``maxOpenSpools`` are open, so that spooled bodies never take the descriptors that
  /// sockets and outputs need.
  package static func openSpool(in directory: String) -> Int32 {
    guard openSpools.add(1, ordering: .relaxed).newValue <= maxOpenSpools else {
      openSpools.subtract(1, ordering: .relaxed)
      errno = EMFILE
      return -1
    }
    let descriptor = dr_open_unnamed_at_path(directory, 0o644)
    if descriptor < 0 { openSpools.subtract(1, ordering: .relaxed) }
    return descriptor
  }

  /// Closes a descriptor from ``openSpool(in:)`` that no `ImageBytes` took.
  package static func closeSpool(_ descriptor: Int32) {
    close(descriptor)
    spoolClosed()
  }

  /// Counts a spool descriptor closed (by ``closeSpool(_:)``, or by its `ImageBytes`).
  static func spoolClosed() { openSpools.subtract(1, ordering: .relaxed) }

  /// How many descriptors from ``openSpool(in:)`` are open now.
  package static var openSpoolCount: Int { openSpools.load(ordering: .relaxed) }
  private static let openSpools = Atomic<Int>(0)

  /// The most spool files open at once: an eighth of the soft descriptor limit (128 under the
  /// usual 1024), at most 4096. A transfer holds a socket as well, and its output a directory.
  package static let maxOpenSpools: Int = {
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 16 }
    return Int(min(max(limit.rlim_cur / 8, 4), 4096))
  }()

  /// Links the unnamed file of a spooled body in as the temporary file `temporary` (registered as
  /// `registered`, in one step under the registry's lock, as ``createTemporary(_:in:registered:)``
  /// does), for a rename over the file it replaces. False, having linked nothing, where that
  /// cannot be done (the checks of ``linkSpooled(_:count:in:as:overwrite:path:commit:)``, or the
  /// process is stopping); the caller then writes the bytes as usual.
  private static func linkTemporary(_ descriptor: Int32, count: Int, as temporary: String, in folder: Int32, registered: String)
    -> Bool
  {
    guard let spooled = linkableSpool(descriptor, count: count, in: folder) else { return false }
    return inProgress.withLock { state in
      guard !state.closed, case .linked = link(descriptor, spooled, in: folder, as: temporary) else { return false }
      state.paths.insert(registered)
      return true
    }
  }

  /// What ``link(_:_:in:as:)`` did.
  private enum LinkResult {
    /// `name` is now the file.
    case linked
    /// Nothing was linked, for this `errno` (`EEXIST`: something has that name).
    case failed(Int32)
    /// The link named another file (a `/proc` that is not procfs), and was taken back.
    case takenBack
  }

  /// Links the open file `descriptor`, whose status is `status`, in as `name` in `folder`. The
  /// link follows the magic link `/proc/self/fd/N` to this very file; `name` itself is never
  /// followed: a symlink (or anything) of that name makes the link fail with `EEXIST`. The name
  /// must then be this file: a `/proc` that is not procfs (a mount over `/proc/self/fd`) could
  /// have linked another file in, and that link is taken back.
  private static func link(_ descriptor: Int32, _ status: stat, in folder: Int32, as name: String) -> LinkResult {
    guard linkat(AT_FDCWD, "/proc/self/fd/\(descriptor)", folder, name, AT_SYMLINK_FOLLOW) == 0 else { return .failed(errno) }
    guard namesFile(folder, name, status) else {
      var linked = stat()
      if stat("/proc/self/fd/\(descriptor)", &linked) == 0, namesFile(folder, name, linked) { unlinkat(folder, name, 0) }
      return .takenBack
    }
    return .linked
  }

  /// The status of a spooled body's file when it can be linked into `folder`: an unnamed regular
  /// file (no link yet) of `count` bytes on the same file system; nil otherwise.
  private static func linkableSpool(_ descriptor: Int32, count: Int, in folder: Int32) -> stat? {
    var spooled = stat()
    var directory = stat()
    guard fstat(descriptor, &spooled) == 0, fstat(folder, &directory) == 0, spooled.st_mode & S_IFMT == S_IFREG,
      spooled.st_nlink == 0, spooled.st_size == count, spooled.st_dev == directory.st_dev
    else { return nil }
    return spooled
  }

  /// The error of a write stopped before its file got its name.
  private static func stopped(_ path: String) -> NSError {
    posixError("\(path) was not written: the run was stopped", code: ECANCELED, withReason: false)
  }

  /// Whether `name` in `folder` is the file `status` describes (the same device and inode).
  private static func namesFile(_ folder: Int32, _ name: String, _ status: stat) -> Bool {
    var named = stat()
    return fstatat(folder, name, &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_dev == status.st_dev
      && named.st_ino == status.st_ino
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
