//go:build !amd64

package main

import "fmt"

// gateLie needs amd64's registers (gatelie_amd64.go).
func gateLie() { fmt.Println("gate-lie: not on this architecture") }
