package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/service"
)

// The key-management requests (superadmin only: the transport checks that before they run).

func createAPIKey(svc service.Service, _ Node, r *fibp.CreateAPIKey) (fibp.Frame, *service.Error) {
	k, e := svc.CreateAPIKey(r.Name, r.ExpiresAtMs, r.IsSuperadmin)
	if e != nil {
		return &fibp.CreateAPIKeyResult{ErrorCode: code(e)}, e
	}
	return &fibp.CreateAPIKeyResult{ErrorCode: fibp.CodeOk, KeyID: k.ID, Key: k.Secret, IsSuperadmin: k.Superadmin}, nil
}

func revokeAPIKey(svc service.Service, _ Node, r *fibp.RevokeAPIKey) (fibp.Frame, *service.Error) {
	e := svc.RevokeAPIKey(r.KeyID)
	return &fibp.RevokeAPIKeyResult{ErrorCode: code(e)}, e
}

func listAPIKeys(svc service.Service, _ Node, _ *fibp.ListAPIKeys) (fibp.Frame, *service.Error) {
	res := &fibp.ListAPIKeysResult{ErrorCode: fibp.CodeOk}
	for _, k := range svc.ListAPIKeys() {
		res.Keys = append(res.Keys, fibp.APIKeyInfo{KeyID: k.ID, Name: k.Name, CreatedAtMs: k.CreatedAt, ExpiresAtMs: k.ExpiresAt, IsSuperadmin: k.Superadmin})
	}
	return res, nil
}

func setACL(svc service.Service, _ Node, r *fibp.SetACL) (fibp.Frame, *service.Error) {
	acl := make([]auth.Permission, len(r.Permissions))
	for i, p := range r.Permissions {
		k, err := auth.ParseKind(p.Kind)
		if err != nil {
			e := &service.Error{Code: service.CodeInvalidConfigValue, Message: err.Error()}
			return &fibp.SetACLResult{ErrorCode: code(e)}, e
		}
		acl[i] = auth.Permission{Kind: k, Pattern: p.Pattern}
	}
	e := svc.SetACL(r.KeyID, acl)
	return &fibp.SetACLResult{ErrorCode: code(e)}, e
}

func getACL(svc service.Service, _ Node, r *fibp.GetACL) (fibp.Frame, *service.Error) {
	k, e := svc.GetACL(r.KeyID)
	if e != nil {
		return &fibp.GetACLResult{ErrorCode: code(e), KeyID: r.KeyID}, e
	}
	res := &fibp.GetACLResult{ErrorCode: fibp.CodeOk, KeyID: k.ID, IsSuperadmin: k.Superadmin}
	for _, p := range k.ACL {
		res.Permissions = append(res.Permissions, fibp.ACLPermission{Kind: p.Kind.String(), Pattern: p.Pattern})
	}
	return res, nil
}
