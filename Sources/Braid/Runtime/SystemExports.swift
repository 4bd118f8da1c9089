// Braid's API speaks Data, URL and DispatchQueue: `import Braid` brings their modules along, so
// a file written against Network.framework compiles with only its import changed, whether or
// not it imports Foundation itself.
@_exported import Dispatch
@_exported import Foundation
