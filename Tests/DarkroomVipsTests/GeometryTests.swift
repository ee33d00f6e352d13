import Darkroom
import DarkroomTesting
import DarkroomVipsTesting
import Testing

@Suite("Resize and crop")
struct GeometryTests {
  let photo: DecodedImage

  init() throws {
    // Materialised: a sequentially decoded image can be read only once, and these tests read it often.
    let decoded = try ImageDecoder().decode(try TestImages.fetched(.png(), width: 400, height: 200, quadrants: true))
    photo = decoded.with(try decoded.image.materialized())
  }

  func size(_ resizer: Resizer, _ image: DecodedImage? = nil) throws -> [Int] {
    let result = try resizer.resize(image ?? photo)
    return [result.width, result.height]
  }

  @Test("dimensions per mode")
  func modes() throws {
    #expect(try size(Resizer(width: 100, height: 100, mode: .fit)) == [100, 50])
    #expect(try size(Resizer(width: 100, height: 100, mode: .fill)) == [100, 100])
    #expect(try size(Resizer(width: 100, height: 100, mode: .stretch)) == [100, 100])
    #expect(try size(Resizer(width: 100, height: 100, mode: .center)) == [100, 100])
    #expect(try size(Resizer(width: 50, mode: .fit)) == [50, 25])
    #expect(try size(Resizer(height: 50, mode: .fit)) == [100, 50])
    #expect(try size(Resizer(width: 30, height: 90, mode: .fill)) == [30, 90])
    #expect(try size(Resizer(width: 1000, height: 1000, mode: .fit)) == [400, 200])  // no upscale by default
    #expect(try size(Resizer(width: 1000, height: 1000, mode: .fit, upscale: true)) == [1000, 500])
    #expect(try size(Resizer(width: 600, height: 600, mode: .fill)) == [400, 200])
    #expect(try size(Resizer(width: 500, height: 300, mode: .center)) == [500, 300])
    #expect(try size(Resizer(width: 123, height: 77, mode: .stretch, kernel: .nearest)) == [123, 77])
  }

  @Test("every kernel resizes", arguments: ResizeKernel.allCases)
  func kernels(_ kernel: ResizeKernel) throws {
    #expect(try size(Resizer(width: 64, height: 64, mode: .fit, kernel: kernel)) == [64, 32])
  }

  @Test("fill crops at its gravity")
  func fillGravity() throws {
    // 400×200 into 100×100: scaled to 200×100, then the west half (red/blue) or east half (green/white) kept.
    let west = try Resizer(width: 100, height: 100, mode: .fill, crop: .gravity(.west)).resize(photo).image.materialized()
    #expect(colour(try west.pixel(x: 20, y: 20), isNear: TestImages.Quadrant.red))
    #expect(colour(try west.pixel(x: 80, y: 80), isNear: TestImages.Quadrant.blue))
    let east = try Resizer(width: 100, height: 100, mode: .fill, crop: .gravity(.east)).resize(photo).image.materialized()
    #expect(colour(try east.pixel(x: 20, y: 20), isNear: TestImages.Quadrant.green))
    #expect(colour(try east.pixel(x: 80, y: 80), isNear: TestImages.Quadrant.white))
  }

  @Test("center pads with the background")
  func centerPads() throws {
    let padded = try Resizer(width: 600, height: 300, mode: .center, background: [10, 20, 30, 255]).resize(photo).image
      .materialized()
    #expect(colour(try padded.pixel(x: 5, y: 5), isNear: [10, 20, 30], tolerance: 2))
    #expect(colour(try padded.pixel(x: 150, y: 100), isNear: TestImages.Quadrant.red, tolerance: 2))
  }

  @Test("crop regions keep the right area")
  func crops() throws {
    let topLeft = try Cropper(.relative(x: 0, y: 0, width: 0.5, height: 0.5)).crop(photo).materializedForTest()
    #expect([topLeft.width, topLeft.height] == [200, 100])
    #expect(colour(try topLeft.image.pixel(x: 100, y: 50), isNear: TestImages.Quadrant.red, tolerance: 2))
    let pixels = try Cropper(.pixels(x: 300, y: 150, width: 50, height: 40)).crop(photo).materializedForTest()
    #expect([pixels.width, pixels.height] == [50, 40])
    #expect(colour(try pixels.image.pixel(x: 25, y: 20), isNear: TestImages.Quadrant.white, tolerance: 2))
    let clamped = try Cropper(.pixels(x: 350, y: 0, width: 500, height: 500)).crop(photo)
    #expect([clamped.width, clamped.height] == [50, 200])
    let northeast = try Cropper(.box(width: 100, height: 60, gravity: .northeast)).crop(photo).materializedForTest()
    #expect(colour(try northeast.image.pixel(x: 50, y: 30), isNear: TestImages.Quadrant.green, tolerance: 2))
    let southwest = try Cropper(.box(width: 100, height: 60, gravity: .southwest)).crop(photo).materializedForTest()
    #expect(colour(try southwest.image.pixel(x: 50, y: 30), isNear: TestImages.Quadrant.blue, tolerance: 2))
    for strategy in SmartCropStrategy.allCases {
      let smart = try Cropper(.smart(width: 120, height: 80, strategy: strategy)).crop(photo)
      #expect([smart.width, smart.height] == [120, 80])
    }
  }

  @Test("EXIF orientations come out upright", arguments: 1...8)
  func orientation(_ orientation: Int) throws {
    // Stored: 60×40 quadrants tagged with the orientation; expected: what a viewer shows.
    let width = 60
    let height = 40
    let stored = TestImages.quadrantPixels(width: width, height: height)
    // JPEG: its EXIF block carries the orientation tag. Quadrant colours survive it closely.
    let fetched = try TestImages.fetched(
      .jpeg(quality: 95), width: width, height: height, quadrants: true, orientation: orientation)
    let decoded = try ImageDecoder().decode(fetched).materializedForTest()
    let swaps = orientation >= 5
    #expect([decoded.width, decoded.height] == (swaps ? [height, width] : [width, height]))
    #expect(decoded.image.orientation == 1)
    func storedColour(_ x: Int, _ y: Int) -> [UInt8] {
      let offset = (y * width + x) * 3
      return Array(stored[offset..<offset + 3])
    }
    // Displayed (u, v) ← stored pixel, per the EXIF specification.
    func expected(_ u: Int, _ v: Int) -> [UInt8] {
      switch orientation {
      case 2: storedColour(width - 1 - u, v)
      case 3: storedColour(width - 1 - u, height - 1 - v)
      case 4: storedColour(u, height - 1 - v)
      case 5: storedColour(v, u)
      case 6: storedColour(v, height - 1 - u)
      case 7: storedColour(width - 1 - v, height - 1 - u)
      case 8: storedColour(width - 1 - v, u)
      default: storedColour(u, v)
      }
    }
    for (u, v) in [(3, 3), (decoded.width - 4, 3), (3, decoded.height - 4), (decoded.width - 4, decoded.height - 4)] {
      #expect(
        colour(try decoded.image.pixel(x: u, y: v), isNear: expected(u, v), tolerance: 30),
        "orientation \(orientation) at \(u),\(v)")
    }
  }
}
