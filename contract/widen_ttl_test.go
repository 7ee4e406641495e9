package contract_test

import (
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/creds"
)

// Compare reads a credential without a ttl as living as long as the broker makes it.
func TestCompareDefaultTTLIsTheBrokers(t *testing.T) {
	if contract.CredentialDefaultTTL != creds.DefaultTTL {
		t.Errorf("contract's default ttl %v; the broker's is %v", contract.CredentialDefaultTTL, creds.DefaultTTL)
	}
}
