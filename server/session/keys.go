package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
)

// The key-management requests (superadmin only: the transport checks that before they run).

func createAPIKey(b *broker.Broker, _ Node, r *fibp.CreateApiKey) (fibp.Frame, *broker.Error) {
	k, e := b.CreateAPIKey(r.Name, r.ExpiresAtMs, r.IsSuperadmin)
	if e != nil {
		return &fibp.CreateApiKeyResult{ErrorCode: code(e)}, e
	}
	return &fibp.CreateApiKeyResult{ErrorCode: fibp.CodeOk, KeyID: k.ID, Key: k.Secret, IsSuperadmin: k.Superadmin}, nil
}

func revokeAPIKey(b *broker.Broker, _ Node, r *fibp.RevokeApiKey) (fibp.Frame, *broker.Error) {
	e := b.RevokeAPIKey(r.KeyID)
	return &fibp.RevokeApiKeyResult{ErrorCode: code(e)}, e
}

func listAPIKeys(b *broker.Broker, _ Node, _ *fibp.ListApiKeys) (fibp.Frame, *broker.Error) {
	res := &fibp.ListApiKeysResult{ErrorCode: fibp.CodeOk}
	for _, k := range b.ListAPIKeys() {
		res.Keys = append(res.Keys, fibp.APIKeyInfo{KeyID: k.ID, Name: k.Name, CreatedAtMs: k.CreatedAt, ExpiresAtMs: k.ExpiresAt, IsSuperadmin: k.Superadmin})
	}
	return res, nil
}

func setACL(b *broker.Broker, _ Node, r *fibp.SetAcl) (fibp.Frame, *broker.Error) {
	acl := make([]auth.Permission, len(r.Permissions))
	for i, p := range r.Permissions {
		k, err := auth.ParseKind(p.Kind)
		if err != nil {
			e := &broker.Error{Code: broker.CodeInvalidConfigValue, Message: err.Error()}
			return &fibp.SetAclResult{ErrorCode: code(e)}, e
		}
		acl[i] = auth.Permission{Kind: k, Pattern: p.Pattern}
	}
	e := b.SetACL(r.KeyID, acl)
	return &fibp.SetAclResult{ErrorCode: code(e)}, e
}

func getACL(b *broker.Broker, _ Node, r *fibp.GetAcl) (fibp.Frame, *broker.Error) {
	k, e := b.GetACL(r.KeyID)
	if e != nil {
		return &fibp.GetAclResult{ErrorCode: code(e), KeyID: r.KeyID}, e
	}
	res := &fibp.GetAclResult{ErrorCode: fibp.CodeOk, KeyID: k.ID, IsSuperadmin: k.Superadmin}
	for _, p := range k.ACL {
		res.Permissions = append(res.Permissions, fibp.ACLPermission{Kind: p.Kind.String(), Pattern: p.Pattern})
	}
	return res, nil
}
